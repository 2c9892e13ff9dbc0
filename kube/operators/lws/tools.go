//go:build tools

// Package tools names the program this module builds: the LeaderWorkerSet controller,
// whose main package is cmd/ of sigs.k8s.io/lws (lws v0.9.0, cmd/main.go), one blank
// import with the program's name in a trailing comment. Nothing here is compiled:
// torchpod_toolkit.kube.build reads this list and runs one `go build` per program, into a
// cache outside the checkout.
package tools

import (
	_ "sigs.k8s.io/lws/cmd" // lws
)
