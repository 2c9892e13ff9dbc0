//go:build tools

// Package tools names the program this module builds: the Kubeflow Trainer v2 controller
// manager (TrainJob, TrainingRuntime, ClusterTrainingRuntime), one blank import of its main
// package (trainer v2.3.0, cmd/trainer-controller-manager). Nothing here is compiled:
// torchpod_toolkit.kube.build reads this list and runs one `go build` per program, into a
// cache outside the checkout.
package tools

import (
	_ "github.com/kubeflow/trainer/v2/cmd/trainer-controller-manager"
)
