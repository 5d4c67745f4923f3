// Command etcd is etcd's own server, built from go.etcd.io/etcd/server/v3 at the
// version k8s.io/kubernetes pins, since etcd's main package lives in a module of its
// own that is not required by anything else here.
package main

import (
	"os"

	"go.etcd.io/etcd/server/v3/etcdmain"
)

func main() {
	etcdmain.Main(os.Args)
}
