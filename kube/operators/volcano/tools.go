//go:build tools

// Package tools names the programs this module builds: Volcano's controller manager,
// scheduler and admission webhook manager (volcano v1.10.0, cmd/), one blank import of each
// main package with the program's name, as upstream's images name it, in a trailing
// comment. Nothing here is compiled: torchpod_toolkit.kube.build reads this list and runs
// one `go build` per program, into a cache outside the checkout.
package tools

import (
	_ "volcano.sh/volcano/cmd/controller-manager" // vc-controller-manager
	_ "volcano.sh/volcano/cmd/scheduler"          // vc-scheduler
	_ "volcano.sh/volcano/cmd/webhook-manager"    // vc-webhook-manager
)
