//go:build tools

// Package tools names the program this module builds: the JobSet controller, whose main
// package is the root of sigs.k8s.io/jobset (jobset v0.12.0, main.go), one blank import
// with the program's name in a trailing comment. Nothing here is compiled:
// torchpod_toolkit.kube.build reads this list and runs one `go build` per program, into a
// cache outside the checkout.
package tools

import (
	_ "sigs.k8s.io/jobset" // jobset
)
