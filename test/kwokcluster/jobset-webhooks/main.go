// Command jobset-webhooks prepares JobSet's controller for a kwok cluster
// (see kwokcluster.PrepareJobSetController) and prints its configuration
// file: hack/demo.sh runs bin/k8s/jobset with it.
//
//	go run ./test/kwokcluster/jobset-webhooks --kubeconfig K --dir D --port P
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
	port := fs.Int("port", 0, "the port JobSet's webhooks listen on, on 127.0.0.1")
	_ = fs.Parse(os.Args[1:]) // ExitOnError: exits on a bad flag
	if err := run(*kubeconfig, *dir, *port); err != nil {
		fmt.Fprintln(os.Stderr, "jobset-webhooks:", err)
		os.Exit(1)
	}
}

func run(kubeconfig, dir string, port int) error {
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
	config, err := kwokcluster.PrepareJobSetController(context.Background(), c, dir, port)
	if err != nil {
		return err
	}
	fmt.Println(config)
	return nil
}
