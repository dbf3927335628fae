// Command jobset-webhooks prepares JobSet's controller, or with
// --controller lws LeaderWorkerSet's, for a kwok cluster (see
// kwokcluster.PrepareJobSetController, PrepareLWSController) and prints its
// configuration file: hack/demo.sh runs bin/k8s/jobset (bin/k8s/lws) with
// it.
//
//	go run ./test/kwokcluster/jobset-webhooks --kubeconfig K --dir D --port P [--controller lws]
package main

import (
	"context"
	"flag"
	"fmt"
	"os"

	"k8s.io/client-go/tools/clientcmd"
	"sigs.k8s.io/controller-runtime/pkg/client"

	"strata.dev/strata/pkg/scheme"
	"strata.dev/strata/test/kwokcluster"
)

func main() {
	// Its own flag set: controller-runtime registers --kubeconfig on the
	// default one.
	fs := flag.NewFlagSet("jobset-webhooks", flag.ExitOnError)
	kubeconfig := fs.String("kubeconfig", "", "an admin kubeconfig of the cluster")
	dir := fs.String("dir", "", "where the certificate and the configuration go")
	port := fs.Int("port", 0, "the port the controller's webhooks listen on, on 127.0.0.1")
	controller := fs.String("controller", "jobset", "jobset or lws")
	_ = fs.Parse(os.Args[1:]) // ExitOnError: exits on a bad flag
	if err := run(*kubeconfig, *dir, *port, *controller); err != nil {
		fmt.Fprintln(os.Stderr, "jobset-webhooks:", err)
		os.Exit(1)
	}
}

func run(kubeconfig, dir string, port int, controller string) error {
	if kubeconfig == "" || dir == "" || port == 0 {
		return fmt.Errorf("--kubeconfig, --dir and --port are required")
	}
	cfg, err := clientcmd.BuildConfigFromFlags("", kubeconfig)
	if err != nil {
		return err
	}
	c, err := client.New(cfg, client.Options{Scheme: scheme.New()})
	if err != nil {
		return err
	}
	prepare := kwokcluster.PrepareJobSetController
	switch controller {
	case "jobset":
	case "lws":
		prepare = kwokcluster.PrepareLWSController
	default:
		return fmt.Errorf("--controller %q: want jobset or lws", controller)
	}
	config, err := prepare(context.Background(), c, dir, port)
	if err != nil {
		return err
	}
	fmt.Println(config)
	return nil
}
