// promrules checks Prometheus rule files the way `promtool check rules` does (rulefmt.Parse: YAML
// structure, PromQL of every expr, label and annotation templates, durations), without building
// promtool itself: promtool links every service-discovery SDK and takes many minutes to compile on
// a small CI machine; this links only the rule parser. Usage: promrules <file>...
package main

import (
	"fmt"
	"log/slog"
	"os"

	"github.com/prometheus/common/model"
	"github.com/prometheus/prometheus/model/rulefmt"
	"github.com/prometheus/prometheus/promql/parser"
)

func main() {
	logger := slog.New(slog.NewTextHandler(os.Stderr, nil))
	failed := false
	for _, file := range os.Args[1:] {
		content, err := os.ReadFile(file)
		if err != nil {
			fmt.Fprintln(os.Stderr, err)
			os.Exit(1)
		}
		// As promtool check rules: unknown fields rejected, UTF-8 metric names, default parser options.
		groups, errs := rulefmt.Parse(content, false, model.UTF8Validation, parser.NewParser(parser.Options{}), logger)
		if len(errs) > 0 {
			failed = true
			for _, e := range errs {
				fmt.Fprintf(os.Stderr, "%s: %v\n", file, e)
			}
			continue
		}
		n := 0
		for _, g := range groups.Groups {
			n += len(g.Rules)
		}
		fmt.Printf("%s: SUCCESS: %d rules found\n", file, n)
	}
	if failed {
		os.Exit(1)
	}
}
