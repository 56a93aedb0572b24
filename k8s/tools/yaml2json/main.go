// yaml2json reads a stream of YAML documents (kustomize build output) on stdin and writes them as
// one JSON array on stdout, so that the Node tests and scripts can inspect rendered manifests
// without a YAML library of their own. Empty documents are skipped.
package main

import (
	"encoding/json"
	"errors"
	"fmt"
	"io"
	"os"

	"gopkg.in/yaml.v3"
)

func main() {
	dec := yaml.NewDecoder(os.Stdin)
	docs := []any{}
	for {
		var doc any
		err := dec.Decode(&doc)
		if errors.Is(err, io.EOF) {
			break
		}
		if err != nil {
			fmt.Fprintln(os.Stderr, "yaml2json:", err)
			os.Exit(1)
		}
		if doc != nil {
			docs = append(docs, doc)
		}
	}
	out, err := json.Marshal(docs)
	if err != nil {
		fmt.Fprintln(os.Stderr, "yaml2json:", err)
		os.Exit(1)
	}
	os.Stdout.Write(append(out, '\n'))
}
