//go:build tools

// crane, for `scripts/image.sh push` (pinned here with the library).
package main

import _ "github.com/google/go-containerregistry/cmd/crane"
