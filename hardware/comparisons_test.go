package hardware

import (
	"fmt"
	"go/ast"
	"go/parser"
	"go/token"
	"io/fs"
	"os"
	"path/filepath"
	"regexp"
	"slices"
	"strconv"
	"strings"
	"testing"
)

// decides are the packages that may compare driver and interface names:
// this registry, and the BMC drivers and the BMC emulator that implement
// them (each registers under its own name).
var decides = []string{"hardware", "bmc", "vbmc"}

// allowedComparisons are the comparisons against a registered name the
// scan accepts outside the packages that decide, as "file: expression",
// each with its reason. Keep it empty: ask the registry instead.
var allowedComparisons = map[string]string{}

// namesAnInterface matches an identifier that holds a driver or an
// interface name (n.Driver, BIOSInterface, ifaces["firmware"], impl), or
// the key that reads one from a node (str(node, "raid_interface")), so
// that a generic word such as "pxe" or "agent" is flagged only when it is
// compared as an interface name, not as a boot device or a boot method.
var namesAnInterface = regexp.MustCompile(`(?i)driver|interface|iface|^impl$`)

// keyOfAName matches a node field that holds a driver or an interface
// name, as a string key reads it.
var keyOfAName = regexp.MustCompile(`^"(driver|[a-z]+_interface)"$`)

// TestNoNameComparisonsOutsideTheRegistry: "the registry decides". No
// non-test code outside hardware/, bmc/ and vbmc/ compares a driver or an
// interface against a registered name (==, !=, a switch case,
// strings.EqualFold), whether written as a string literal or as one of
// this package's Interface constants; it asks the registry (Type's and
// Implementation's methods, BootOf, BIOSOf, StepsOf, ...) what the type or
// the interface does. Tables keyed by interface name (a map literal) are
// data, not comparisons, and are not flagged.
func TestNoNameComparisonsOutsideTheRegistry(t *testing.T) {
	names := registeredNames()
	consts := interfaceConstants(t)
	var found []string
	root := filepath.Join("..")
	err := filepath.WalkDir(root, func(path string, d fs.DirEntry, err error) error {
		if err != nil {
			return err
		}
		rel, _ := filepath.Rel(root, path)
		if d.IsDir() {
			if rel != "." && (strings.HasPrefix(d.Name(), ".") || d.Name() == "bin" || d.Name() == "node_modules" || slices.Contains(decides, filepath.ToSlash(rel))) {
				return filepath.SkipDir
			}
			// A module of its own is not ironflow's code: tests/metal3
			// compares names as the Metal3 client it imitates does.
			if _, err := os.Stat(filepath.Join(path, "go.mod")); err == nil && rel != "." {
				return filepath.SkipDir
			}
			return nil
		}
		if !strings.HasSuffix(path, ".go") || strings.HasSuffix(path, "_test.go") {
			return nil
		}
		fset := token.NewFileSet()
		f, err := parser.ParseFile(fset, path, nil, 0)
		if err != nil {
			return err
		}
		for _, c := range nameComparisons(fset, f, names, consts) {
			key := filepath.ToSlash(rel) + ": " + c.expr
			if _, ok := allowedComparisons[key]; ok {
				continue
			}
			found = append(found, fmt.Sprintf("%s:%d: %s", filepath.ToSlash(rel), c.line, c.expr))
		}
		return nil
	})
	if err != nil {
		t.Fatal(err)
	}
	for _, f := range found {
		t.Errorf("%s compares a driver or interface name: ask the registry (package hardware) instead", f)
	}
}

// TestTheScanFindsComparisons keeps the scan honest: it flags what it is
// meant to and leaves boot devices, tables and messages alone.
func TestTheScanFindsComparisons(t *testing.T) {
	src := `package p
import "github.com/ironflow/ironflow/hardware"
func f(n node, dev, method string, ifaces map[string]hardware.Interface) {
	_ = n.Driver == "ipmi"                          // flagged
	_ = "fake-hardware" != n.Driver                 // flagged
	_ = n.BIOSInterface != hardware.Redfish         // flagged
	_ = ifaces["firmware"] == hardware.Redfish      // flagged
	_ = n.BootInterface == "redfish-virtual-media"  // flagged
	_ = strings.EqualFold(n.DeployInterface, "direct") // flagged
	switch n.DeployInterface { case "ramdisk": }    // flagged
	switch hardware.Interface(n.BootInterface) { case hardware.IPXE, hardware.PXE: } // flagged twice
	_ = dev == "pxe"
	_ = method == "pxe"
	_ = n.Step.Interface == "bios"
	_ = map[hardware.Interface]int{hardware.Redfish: 1}
	_ = fmt.Sprintf("Driver %s does not support", "ipmi")
	_ = iface != string(hardware.NoRAID)            // flagged
	_ = str(node, "raid_interface") == "agent"      // flagged
	_ = str(node, "boot_device") == "pxe"
	_ = n.Driver == other
}`
	fset := token.NewFileSet()
	f, err := parser.ParseFile(fset, "p.go", src, 0)
	if err != nil {
		t.Fatal(err)
	}
	got := nameComparisons(fset, f, registeredNames(), interfaceConstants(t))
	var lines []int
	for _, c := range got {
		lines = append(lines, c.line)
	}
	if want := []int{4, 5, 6, 7, 8, 9, 10, 11, 11, 17, 18}; !slices.Equal(lines, want) {
		t.Errorf("flagged lines %v, want %v: %+v", lines, want, got)
	}
}

type comparison struct {
	line int
	expr string
}

// registeredNames are the hardware types' names and every interface name
// ironflow implements.
func registeredNames() map[string]bool {
	names := map[string]bool{}
	for _, n := range Names() {
		names[n] = true
	}
	for _, impls := range implementations {
		for name := range impls {
			names[string(name)] = true
		}
	}
	return names
}

// interfaceConstants are this package's constants of type Interface, read
// from its source.
func interfaceConstants(t *testing.T) map[string]bool {
	consts := map[string]bool{}
	files, err := filepath.Glob("*.go")
	if err != nil {
		t.Fatal(err)
	}
	fset := token.NewFileSet()
	for _, file := range files {
		if strings.HasSuffix(file, "_test.go") {
			continue
		}
		src, err := os.ReadFile(file)
		if err != nil {
			t.Fatal(err)
		}
		f, err := parser.ParseFile(fset, file, src, 0)
		if err != nil {
			t.Fatal(err)
		}
		for _, decl := range f.Decls {
			gd, ok := decl.(*ast.GenDecl)
			if !ok || gd.Tok != token.CONST {
				continue
			}
			for _, spec := range gd.Specs {
				vs := spec.(*ast.ValueSpec)
				if id, ok := vs.Type.(*ast.Ident); ok && id.Name == "Interface" {
					for _, n := range vs.Names {
						consts[n.Name] = true
					}
				}
			}
		}
	}
	if !consts["Redfish"] || !consts["Fake"] {
		t.Fatalf("interface constants not found: %v", consts)
	}
	return consts
}

// nameComparisons returns f's comparisons of a driver or an interface
// against a registered name.
func nameComparisons(fset *token.FileSet, f *ast.File, names, consts map[string]bool) []comparison {
	var out []comparison
	// A hardware type's name is flagged whatever it is compared with.
	types := map[string]bool{}
	for _, n := range Names() {
		types[n] = true
	}
	// registered reports whether e is a registered name: a hardware.X
	// Interface constant, a string literal naming a hardware type, or one
	// naming an interface compared with something that holds one (other).
	registered := func(e, other ast.Expr) bool {
		switch e := conversionOperand(e).(type) {
		case *ast.SelectorExpr:
			pkg, ok := e.X.(*ast.Ident)
			return ok && pkg.Name == "hardware" && consts[e.Sel.Name]
		case *ast.BasicLit:
			if e.Kind != token.STRING {
				return false
			}
			s, err := strconv.Unquote(e.Value)
			return err == nil && (types[s] || names[s] && holdsName(other))
		}
		return false
	}
	flag := func(pos token.Pos, a, b ast.Expr) {
		if registered(a, b) || registered(b, a) {
			out = append(out, comparison{fset.Position(pos).Line, exprText(a) + " vs " + exprText(b)})
		}
	}
	ast.Inspect(f, func(n ast.Node) bool {
		switch n := n.(type) {
		case *ast.BinaryExpr:
			if n.Op == token.EQL || n.Op == token.NEQ {
				flag(n.Pos(), n.X, n.Y)
			}
		case *ast.CallExpr:
			if sel, ok := n.Fun.(*ast.SelectorExpr); ok && len(n.Args) == 2 && sel.Sel.Name == "EqualFold" {
				if pkg, ok := sel.X.(*ast.Ident); ok && pkg.Name == "strings" {
					flag(n.Pos(), n.Args[0], n.Args[1])
				}
			}
		case *ast.SwitchStmt:
			if n.Tag == nil {
				return true
			}
			for _, stmt := range n.Body.List {
				for _, e := range stmt.(*ast.CaseClause).List {
					flag(e.Pos(), n.Tag, e)
				}
			}
		}
		return true
	})
	return out
}

// conversionOperand is e without a conversion to string or to
// hardware.Interface around it: string(hardware.NoRAID) is hardware.NoRAID.
func conversionOperand(e ast.Expr) ast.Expr {
	e = ast.Unparen(e)
	call, ok := e.(*ast.CallExpr)
	if !ok || len(call.Args) != 1 {
		return e
	}
	switch text := exprText(call.Fun); text {
	case "string", "hardware.Interface":
		return conversionOperand(call.Args[0])
	}
	return e
}

// holdsName reports whether e reads like a driver or an interface name:
// one of its identifiers, or a string key it indexes with, matches
// namesAnInterface.
func holdsName(e ast.Expr) bool {
	found := false
	ast.Inspect(e, func(n ast.Node) bool {
		switch n := n.(type) {
		case *ast.Ident:
			found = found || namesAnInterface.MatchString(n.Name)
		case *ast.BasicLit:
			found = found || keyOfAName.MatchString(n.Value)
		case *ast.IndexExpr:
			if lit, ok := n.Index.(*ast.BasicLit); ok && lit.Kind == token.STRING {
				// ifaces["firmware"]: the map holds interface names.
				found = found || namesAnInterface.MatchString(exprText(n.X))
			}
		}
		return !found
	})
	return found
}

// exprText is e as source, near enough for a failure message and an
// allowedComparisons key.
func exprText(e ast.Expr) string {
	switch e := ast.Unparen(e).(type) {
	case *ast.Ident:
		return e.Name
	case *ast.BasicLit:
		return e.Value
	case *ast.SelectorExpr:
		return exprText(e.X) + "." + e.Sel.Name
	case *ast.IndexExpr:
		return exprText(e.X) + "[" + exprText(e.Index) + "]"
	case *ast.CallExpr:
		args := make([]string, len(e.Args))
		for i, a := range e.Args {
			args[i] = exprText(a)
		}
		return exprText(e.Fun) + "(" + strings.Join(args, ", ") + ")"
	case *ast.StarExpr:
		return "*" + exprText(e.X)
	}
	return fmt.Sprintf("%T", e)
}
