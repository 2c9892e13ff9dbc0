//go:build tools

// Package tools names the programs this module builds, one blank import of each main
// package, so that `go mod tidy` keeps their modules in go.mod and go.sum. A trailing
// comment names a program whose package's last element is not its name. Nothing here is
// compiled: torchpod_toolkit.kube.build reads this list and runs one `go build` per
// program, into a cache outside the checkout.
package tools

import (
	_ "go.etcd.io/etcd/server/v3" // etcd
	_ "k8s.io/kubernetes/cmd/kube-apiserver"
	_ "k8s.io/kubernetes/cmd/kube-controller-manager"
	_ "k8s.io/kubernetes/cmd/kube-scheduler"
	_ "k8s.io/kubernetes/cmd/kubectl"
)
