//go:build tools

// Package tools names the program this module builds: the Kubeflow training operator
// (PyTorchJob and the other v1 kinds), one blank import of its main package with the
// program's name in a trailing comment. Nothing here is compiled:
// torchpod_toolkit.kube.build reads this list and runs one `go build` per program, into a
// cache outside the checkout.
package tools

import (
	_ "github.com/kubeflow/training-operator/cmd/training-operator.v1" // training-operator
)
