// Package release reads release versions (vMAJOR.MINOR.PATCH) from
// container image references, which is how this project tells which Fleet
// or Rancher it is running beside.
package release

import (
	"fmt"
	"strconv"
	"strings"
)

// Version is a release version vMAJOR.MINOR.PATCH.
type Version struct{ Major, Minor, Patch int }

// String formats v as vMAJOR.MINOR.PATCH.
func (v Version) String() string { return fmt.Sprintf("v%d.%d.%d", v.Major, v.Minor, v.Patch) }

// AtLeast reports whether v is major.minor.patch or later.
func (v Version) AtLeast(major, minor, patch int) bool {
	if v.Major != major {
		return v.Major > major
	}
	if v.Minor != minor {
		return v.Minor > minor
	}
	return v.Patch >= patch
}

// Parse reads "vMAJOR.MINOR.PATCH", with an optional pre-release or build
// suffix (-rc.1, +build); the leading v is required, as in release tags.
func Parse(tag string) (Version, bool) {
	rest := strings.TrimPrefix(tag, "v")
	if rest == tag {
		return Version{}, false
	}
	parts := strings.SplitN(rest, ".", 3)
	if len(parts) != 3 {
		return Version{}, false
	}
	patch := parts[2]
	if j := strings.IndexAny(patch, "-+"); j >= 0 {
		patch = patch[:j]
	}
	var v Version
	var err1, err2, err3 error
	v.Major, err1 = strconv.Atoi(parts[0])
	v.Minor, err2 = strconv.Atoi(parts[1])
	v.Patch, err3 = strconv.Atoi(patch)
	return v, err1 == nil && err2 == nil && err3 == nil
}

// FromImage reads the release version from an image reference's tag
// (repo:tag, also repo:tag@sha256:digest and registry:port/repo:tag);
// false when the tag is not a release version (dev, latest, a digest
// alone).
func FromImage(image string) (Version, bool) {
	if at := strings.Index(image, "@"); at >= 0 {
		image = image[:at]
	}
	i := strings.LastIndex(image, ":")
	if i < 0 || strings.Contains(image[i:], "/") {
		return Version{}, false
	}
	return Parse(image[i+1:])
}
