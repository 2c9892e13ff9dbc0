//go:build tools

// Package tools names the program this module builds: the Kueue controller manager, whose
// main package is sigs.k8s.io/kueue/cmd/kueue (kueue v0.17.0, cmd/kueue/main.go), one blank
// import with the program's name in a trailing comment. Nothing here is compiled:
// torchpod_toolkit.kube.build reads this list and runs one `go build` per program, into a
// cache outside the checkout.
package tools

import (
	_ "sigs.k8s.io/kueue/cmd/kueue" // kueue
)
