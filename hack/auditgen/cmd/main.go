// Command auditgen writes a synthetic kube-apiserver audit log (see
// package auditgen): the SURE-3805 mix of Fleet locks at wrangler's 2s
// beside other traffic.
//
//	go run ./hack/auditgen/cmd -o audit.log -duration 4h24m
//	go run ./hack/auditgen/cmd -o audit.log -size 300MiB -stages
package main

import (
	"bufio"
	"flag"
	"fmt"
	"os"
	"strconv"
	"strings"
	"time"

	"leasetune.io/leasetune/hack/auditgen"
)

func main() {
	out := flag.String("o", "audit.log", "output file")
	duration := flag.Duration("duration", 4*time.Hour+24*time.Minute, "time span of the log")
	size := flag.String("size", "", "approximate size instead of -duration, e.g. 300MiB")
	stages := flag.Bool("stages", false, "also write the RequestReceived stage of every request (a policy without omitStages)")
	level := flag.String("level", "Metadata", "Metadata or RequestResponse")
	seed := flag.Int64("seed", 1, "random seed")
	flag.Parse()

	o := auditgen.SURE3805(time.Date(2024, 1, 1, 0, 0, 0, 0, time.UTC))
	o.Duration, o.RequestReceived, o.Level, o.Seed = *duration, *stages, *level, *seed
	if *size != "" {
		n, err := strconv.ParseInt(strings.TrimSuffix(*size, "MiB"), 10, 64)
		if err != nil {
			fmt.Fprintf(os.Stderr, "-size %q: want e.g. 300MiB\n", *size)
			os.Exit(2)
		}
		o = auditgen.ForSize(o, n<<20)
	}
	f, err := os.Create(*out)
	if err != nil {
		fmt.Fprintln(os.Stderr, err)
		os.Exit(1)
	}
	w := bufio.NewWriter(f)
	st, err := auditgen.Write(w, o)
	if err == nil {
		err = w.Flush()
	}
	if cerr := f.Close(); err == nil {
		err = cerr
	}
	if err != nil {
		fmt.Fprintln(os.Stderr, err)
		os.Exit(1)
	}
	fmt.Printf("%s: %d lines, %d requests over %s\n", *out, st.Lines, st.Requests, o.Duration)
}
