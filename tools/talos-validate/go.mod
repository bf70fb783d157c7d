// Not used by the builds: each Talos minor has its own go.v1.NN.mod and go.v1.NN.sum (go build -modfile=…),
// because one module cannot require three versions of the Talos machinery. The go command needs this file to find
// the module root. See docs/adr/0014-talos-validate.md.
module terravixens/tools/talos-validate

go 1.26
