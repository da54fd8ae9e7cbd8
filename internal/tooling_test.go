package internal

import (
	"bytes"
	"os/exec"
	"slices"
	"strings"
	"testing"
)

const module = "github.com/ironflow/ironflow"

// isTooling reports whether the package at path is tooling: below
// internal/ (test kits, the benchmark, the history recorder) or tests/
// (the integration and VM tests and their labs).
func isTooling(path string) bool {
	for _, root := range []string{module + "/internal", module + "/tests"} {
		if path == root || strings.HasPrefix(path, root+"/") {
			return true
		}
	}
	return false
}

// toolingReached walks imports (package → its non-test imports) from roots
// and returns, for each tooling package reached, the chain of imports that
// reaches it ("cmd/ironflow → store → internal/testkit/storetest"), sorted.
func toolingReached(imports map[string][]string, roots []string) []string {
	from := map[string]string{}
	queue := []string{}
	for _, r := range roots {
		from[r] = ""
		queue = append(queue, r)
	}
	var chains []string
	for len(queue) > 0 {
		p := queue[0]
		queue = queue[1:]
		if isTooling(p) {
			var chain []string
			for q := p; q != ""; q = from[q] {
				chain = append(chain, strings.TrimPrefix(q, module+"/"))
			}
			slices.Reverse(chain)
			chains = append(chains, strings.Join(chain, " → "))
			continue
		}
		for _, imp := range imports[p] {
			if _, seen := from[imp]; !seen {
				from[imp] = p
				queue = append(queue, imp)
			}
		}
	}
	slices.Sort(chains)
	return chains
}

// TestProductImportsNoTooling lists, with the go command, every package
// the commands build from (non-test imports only, as `go build` sees them)
// and fails when one of them is tooling: the product must build and run
// without a test kit, the benchmark or a test lab.
func TestProductImportsNoTooling(t *testing.T) {
	goBin, err := exec.LookPath("go")
	if err != nil {
		t.Fatalf("listing the commands' imports needs the go command on PATH: %v", err)
	}
	cmd := exec.Command(goBin, "list", "-deps", "-f", "{{.ImportPath}}{{range .Imports}} {{.}}{{end}}", module+"/cmd/...")
	var stderr bytes.Buffer
	cmd.Stderr = &stderr
	out, err := cmd.Output()
	if err != nil {
		t.Fatalf("go list: %v\n%s", err, stderr.String())
	}
	imports := map[string][]string{}
	var roots []string
	for line := range strings.Lines(string(out)) {
		f := strings.Fields(line)
		if len(f) == 0 {
			continue
		}
		imports[f[0]] = f[1:]
		if strings.HasPrefix(f[0], module+"/cmd/") {
			roots = append(roots, f[0])
		}
	}
	// A listing that missed the commands or package embedded would pass
	// without having looked.
	for _, want := range []string{module + "/cmd/ironflow", module + "/cmd/ironflow-agent", module + "/embedded"} {
		if _, ok := imports[want]; !ok {
			t.Fatalf("go list -deps ./cmd/... does not list %s: the check would look at nothing", want)
		}
	}
	for _, chain := range toolingReached(imports, roots) {
		t.Errorf("product code imports tooling: %s (move what the product needs out of internal/ or tests/, e.g. into embedded/)", chain)
	}
}

func TestToolingReachedNamesTheChain(t *testing.T) {
	imports := map[string][]string{
		module + "/cmd/ironflow": {module + "/store", "fmt"},
		module + "/store":        {module + "/internal/testkit/storetest", module + "/embedded"},
		module + "/embedded":     {"os"},
		// Tooling importing the product is the allowed direction.
		module + "/internal/testkit/storetest": {module + "/store"},
		module + "/cmd/ironflow-agent":         {module + "/tests/e2e"},
	}
	got := toolingReached(imports, []string{module + "/cmd/ironflow", module + "/cmd/ironflow-agent"})
	want := []string{
		"cmd/ironflow → store → internal/testkit/storetest",
		"cmd/ironflow-agent → tests/e2e",
	}
	if !slices.Equal(got, want) {
		t.Errorf("toolingReached = %q, want %q", got, want)
	}
	if got := toolingReached(map[string][]string{module + "/cmd/ironflow": {module + "/embedded"}}, []string{module + "/cmd/ironflow"}); len(got) != 0 {
		t.Errorf("a product-only graph reports %q", got)
	}
	for path, want := range map[string]bool{
		module + "/internal":                   true,
		module + "/internal/bench":             true,
		module + "/tests":                      true,
		module + "/tests/e2e":                  true,
		module + "/embedded":                   false,
		module + "/testsuite":                  false,
		module + "/store":                      false,
		"example.com/other/internal/something": false,
	} {
		if got := isTooling(path); got != want {
			t.Errorf("isTooling(%s) = %v, want %v", path, got, want)
		}
	}
}
