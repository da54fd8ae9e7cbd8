package workflows_test

import (
	"encoding/base64"
	"encoding/json"
	"go/ast"
	"go/parser"
	"go/token"
	"os"
	"path/filepath"
	"slices"
	"strconv"
	"strings"
	"testing"

	"github.com/ironflow/ironflow"
	"github.com/ironflow/ironflow/worker"
	"github.com/ironflow/ironflow/workflows"
)

// recordedHistory is what the coverage tests read of a recorded history:
// its workflow type and the change IDs of its version markers.
type recordedHistory struct {
	file      string
	wfType    string
	changeIDs []string
}

func recordedHistories(t *testing.T) []recordedHistory {
	t.Helper()
	files, err := filepath.Glob(filepath.Join("testdata", "history", "*", "*.json"))
	if err != nil || len(files) == 0 {
		t.Fatalf("no recorded histories: %v", err)
	}
	var out []recordedHistory
	for _, f := range files {
		b, err := os.ReadFile(f)
		if err != nil {
			t.Fatal(err)
		}
		// The JSON of `temporal workflow show --output json`: proto JSON,
		// payload data base64.
		var h struct {
			Events []struct {
				Started *struct {
					WorkflowType struct{ Name string } `json:"workflowType"`
				} `json:"workflowExecutionStartedEventAttributes"`
				Marker *struct {
					MarkerName string `json:"markerName"`
					Details    map[string]struct {
						Payloads []struct {
							Metadata map[string]string `json:"metadata"`
							Data     string            `json:"data"`
						} `json:"payloads"`
					} `json:"details"`
				} `json:"markerRecordedEventAttributes"`
			} `json:"events"`
		}
		if err := json.Unmarshal(b, &h); err != nil {
			t.Fatalf("%s: %v", f, err)
		}
		rh := recordedHistory{file: f}
		for _, e := range h.Events {
			if e.Started != nil {
				rh.wfType = e.Started.WorkflowType.Name
			}
			// GetVersion's marker (the SDK's "Version" marker, its change
			// ID a JSON string in the "change-id" detail).
			if e.Marker == nil || e.Marker.MarkerName != "Version" {
				continue
			}
			for _, p := range e.Marker.Details["change-id"].Payloads {
				if enc, _ := base64.StdEncoding.DecodeString(p.Metadata["encoding"]); string(enc) != "json/plain" {
					t.Fatalf("%s: a version marker's payload is encoded as %q: the recorder must write plain JSON histories", f, enc)
				}
				raw, err := base64.StdEncoding.DecodeString(p.Data)
				var id string
				if err == nil {
					err = json.Unmarshal(raw, &id)
				}
				if err != nil {
					t.Fatalf("%s: version marker's change-id: %v", f, err)
				}
				rh.changeIDs = append(rh.changeIDs, id)
			}
		}
		out = append(out, rh)
	}
	return out
}

// declaredChangeIDs are the string constants of versions.go, by name.
func declaredChangeIDs(t *testing.T) map[string]string {
	t.Helper()
	f, err := parser.ParseFile(token.NewFileSet(), "versions.go", nil, 0)
	if err != nil {
		t.Fatal(err)
	}
	ids := map[string]string{}
	for _, d := range f.Decls {
		g, ok := d.(*ast.GenDecl)
		if !ok || g.Tok != token.CONST {
			continue
		}
		for _, spec := range g.Specs {
			vs := spec.(*ast.ValueSpec)
			for i, name := range vs.Names {
				lit, ok := vs.Values[i].(*ast.BasicLit)
				if !ok || lit.Kind != token.STRING {
					t.Fatalf("versions.go: %s is not a string literal: change IDs are plain strings", name.Name)
				}
				v, _ := strconv.Unquote(lit.Value)
				ids[name.Name] = v
			}
		}
	}
	return ids
}

// TestEveryGetVersionNamesADeclaredChangeID: every GetVersion call of the
// package names a constant of workflows/versions.go, never a literal, so
// that the list of gates is complete; and the recorded histories, which
// are the last release's, carry no change ID of a gate since removed (a
// release records its histories after its gates against the release
// before it were retired, docs/versioning.md). A gate's old path is what
// the histories replay; its new path is a unit test's (OnGetVersion).
func TestEveryGetVersionNamesADeclaredChangeID(t *testing.T) {
	ids := declaredChangeIDs(t)
	declared := map[string]bool{}
	for _, id := range ids {
		declared[id] = true
	}
	for _, h := range recordedHistories(t) {
		for _, id := range h.changeIDs {
			if !declared[id] {
				t.Errorf("%s: version marker %q names no change ID of workflows/versions.go: the recorded histories "+
					"are not the last release's (make record-histories at the release, docs/versioning.md)", h.file, id)
			}
		}
	}
	// Every GetVersion call takes its change ID from versions.go.
	files, _ := filepath.Glob("*.go")
	for _, file := range files {
		if strings.HasSuffix(file, "_test.go") {
			continue
		}
		fset := token.NewFileSet()
		f, err := parser.ParseFile(fset, file, nil, 0)
		if err != nil {
			t.Fatal(err)
		}
		ast.Inspect(f, func(n ast.Node) bool {
			call, ok := n.(*ast.CallExpr)
			if !ok {
				return true
			}
			sel, ok := call.Fun.(*ast.SelectorExpr)
			if !ok || sel.Sel.Name != "GetVersion" || len(call.Args) < 2 {
				return true
			}
			ident, ok := call.Args[1].(*ast.Ident)
			if !ok || ids[ident.Name] == "" {
				t.Errorf("%s: workflow.GetVersion's change ID must be a constant of workflows/versions.go (docs/versioning.md)",
					fset.Position(call.Pos()))
			}
			return true
		})
	}
}

// TestEveryWorkflowTypeHasARecordedHistory: every workflow type the worker
// registers is registered by the replay test too and has at least one
// recorded history, and at least one recorded version (directory) has a
// history of every type.
func TestEveryWorkflowTypeHasARecordedHistory(t *testing.T) {
	registered := worker.Workflows()
	for name := range registered {
		if _, ok := workflows.ReplayedWorkflows[name]; !ok {
			t.Errorf("workflow type %s is registered by the worker but not by the replay test", name)
		}
	}
	for name := range workflows.ReplayedWorkflows {
		if _, ok := registered[name]; !ok {
			t.Errorf("the replay test registers %s, which the worker does not", name)
		}
	}
	hs := recordedHistories(t)
	dirs := map[string]map[string]bool{}
	for _, h := range hs {
		dir := filepath.Base(filepath.Dir(h.file))
		if dirs[dir] == nil {
			dirs[dir] = map[string]bool{}
		}
		dirs[dir][h.wfType] = true
	}
	var full []string
	for dir, types := range dirs {
		all := true
		for name := range registered {
			all = all && types[name]
		}
		if all {
			full = append(full, dir)
		}
	}
	// Between releases (a -dev VERSION), a type added since the release
	// has no history yet: its scenario must be in the recorder, and the
	// next release records it (docs/versioning.md).
	dev := strings.HasSuffix(ironflow.Version(), "-dev")
	recorder, err := os.ReadFile(filepath.Join("..", "internal", "record-histories", "main.go"))
	if err != nil {
		t.Fatal(err)
	}
	for name := range registered {
		found := false
		for _, types := range dirs {
			found = found || types[name]
		}
		switch {
		case found:
		case dev && strings.Contains(string(recorder), "wf: workflows.Workflow"+name+","):
			t.Logf("workflow type %s is newer than the release: the next release records its scenario", name)
			full = nil
		default:
			t.Errorf("workflow type %s has no recorded history: add a scenario to internal/record-histories and record "+
				"(make record-histories)", name)
		}
	}
	if len(full) == 0 && !dev {
		t.Errorf("no recorded version has a history of every workflow type; record one (make record-histories)")
	}
	slices.Sort(full)
	t.Logf("versions with a history of every workflow type: %v", full)
}
