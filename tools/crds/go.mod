module terravixens/tools/crds

go 1.26.1

require (
	github.com/cilium/cilium v1.18.4
	github.com/fluxcd/kustomize-controller v1.7.3
	github.com/fluxcd/source-controller v1.7.3
)
