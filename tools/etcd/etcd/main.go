// etcd is the etcd server as the etcd release builds it (go.etcd.io/etcd/v3's main.go calls etcdmain.Main): that root
// module replaces its sibling modules with relative paths, so it cannot be required; its main is this one line over
// the served go.etcd.io/etcd/server/v3 (docs/adr/0058-real-control-plane-in-tests.md).
package main

import (
	"os"

	"go.etcd.io/etcd/server/v3/etcdmain"
)

func main() {
	etcdmain.Main(os.Args)
}
