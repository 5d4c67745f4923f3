// Command vap-check validates ValidatingAdmissionPolicy manifests as kube-apiserver does
// when they are created, without a cluster: it decodes each policy of the YAML files named
// on its command line, defaults and converts it as the API server does, and runs the API
// server's own validation, which compiles and type-checks every CEL expression with the
// API server's environment (cel-go, Kubernetes' libraries, its reserved names, its rule
// that a list or map literal has elements of one type). Each error is printed on a line;
// the exit status is 1 when there is any, 2 when a file cannot be read.
package main

import (
	"errors"
	"fmt"
	"io"
	"os"

	admissionregistrationv1 "k8s.io/api/admissionregistration/v1"
	"k8s.io/apimachinery/pkg/runtime"
	utilyaml "k8s.io/apimachinery/pkg/util/yaml"
	"k8s.io/kubernetes/pkg/api/legacyscheme"
	"k8s.io/kubernetes/pkg/apis/admissionregistration"
	_ "k8s.io/kubernetes/pkg/apis/admissionregistration/install"
	"k8s.io/kubernetes/pkg/apis/admissionregistration/validation"
)

func main() {
	if len(os.Args) < 2 {
		fmt.Fprintln(os.Stderr, "usage: vap-check POLICY.yaml...: name the manifests to validate")
		os.Exit(2)
	}
	failed := false
	for _, path := range os.Args[1:] {
		problems, err := check(path)
		if err != nil {
			fmt.Fprintf(os.Stderr, "%s: %v\n", path, err)
			os.Exit(2)
		}
		for _, p := range problems {
			fmt.Printf("%s: %s\n", path, p)
			failed = true
		}
	}
	if failed {
		os.Exit(1)
	}
}

// check returns the validation errors of every ValidatingAdmissionPolicy in the file.
func check(path string) ([]string, error) {
	file, err := os.Open(path)
	if err != nil {
		return nil, err
	}
	defer file.Close()
	decoder := utilyaml.NewYAMLOrJSONDecoder(file, 4096)
	var problems []string
	for {
		var raw runtime.RawExtension
		if err := decoder.Decode(&raw); errors.Is(err, io.EOF) {
			return problems, nil
		} else if err != nil {
			return nil, err
		}
		var kind struct{ Kind string }
		if err := utilyaml.Unmarshal(raw.Raw, &kind); err != nil {
			return nil, err
		}
		if kind.Kind != "ValidatingAdmissionPolicy" {
			continue
		}
		var external admissionregistrationv1.ValidatingAdmissionPolicy
		if err := utilyaml.Unmarshal(raw.Raw, &external); err != nil {
			return nil, err
		}
		legacyscheme.Scheme.Default(&external)
		var internal admissionregistration.ValidatingAdmissionPolicy
		if err := legacyscheme.Scheme.Convert(&external, &internal, nil); err != nil {
			return nil, err
		}
		for _, e := range validation.ValidateValidatingAdmissionPolicy(&internal) {
			problems = append(problems, e.Error())
		}
	}
}
