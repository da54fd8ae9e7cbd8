package main

import (
	"strings"
	"testing"
)

// A go test -json stream of two packages, one failing, as go 1.26 writes
// it (trimmed): its text is plain go test's, and the slowest list comes
// before the closing FAIL that plain go test prints and go test -json
// does not.
func TestReportPrintsPlainOutputThenTheSlowest(t *testing.T) {
	in := []string{
		`{"Action":"start","Package":"ex/a"}`,
		`{"Action":"run","Package":"ex/a","Test":"TestQuick"}`,
		`{"Action":"output","Package":"ex/a","Test":"TestQuick","Output":"=== RUN   TestQuick\n"}`,
		`{"Action":"output","Package":"ex/a","Test":"TestQuick","Output":"--- PASS: TestQuick (0.10s)\n"}`,
		`{"Action":"pass","Package":"ex/a","Test":"TestQuick","Elapsed":0.1}`,
		`{"Action":"output","Package":"ex/a","Test":"TestSlow/sub","Output":"    --- PASS: TestSlow/sub (7.00s)\n"}`,
		`{"Action":"pass","Package":"ex/a","Test":"TestSlow/sub","Elapsed":7}`,
		`{"Action":"pass","Package":"ex/a","Test":"TestSlow","Elapsed":7.5}`,
		`{"Action":"output","Package":"ex/a","Output":"PASS\n"}`,
		`{"Action":"output","Package":"ex/a","Output":"ok  \tex/a\t7.6s\n"}`,
		`{"Action":"pass","Package":"ex/a","Elapsed":7.6}`,
		`{"Action":"output","Package":"ex/b","Test":"TestBroken","Output":"=== RUN   TestBroken\n"}`,
		`{"Action":"output","Package":"ex/b","Test":"TestBroken","Output":"    b_test.go:9: boom\n"}`,
		`{"Action":"output","Package":"ex/b","Test":"TestBroken","Output":"--- FAIL: TestBroken (2.00s)\n"}`,
		`{"Action":"fail","Package":"ex/b","Test":"TestBroken","Elapsed":2}`,
		`{"Action":"output","Package":"ex/b","Test":"TestHung","Output":"    hung_test.go:3: still waiting\n"}`,
		`{"Action":"output","Package":"ex/b","Output":"FAIL\tex/b\t9.0s\n"}`,
		`{"Action":"fail","Package":"ex/b","Elapsed":9}`,
	}
	var out strings.Builder
	r := newReport(&out)
	for _, l := range in {
		r.line(l)
	}
	r.finish(2)
	want := "ok  \tex/a\t7.6s\n" +
		"    b_test.go:9: boom\n--- FAIL: TestBroken (2.00s)\n" +
		"    hung_test.go:3: still waiting\n" +
		"FAIL\tex/b\t9.0s\n" +
		"\nslowest 2 tests:\n" +
		"     7.50s  ex/a  TestSlow\n" +
		"     2.00s  ex/b  TestBroken\n" +
		"FAIL\n"
	if out.String() != want {
		t.Fatalf("got:\n%s\nwant:\n%s", out.String(), want)
	}
}

func TestSlowestOrdersBySecondsThenPackageAndName(t *testing.T) {
	got := slowest([]result{
		{"p/b", "TestB", 1}, {"p/a", "TestZ", 3}, {"p/a", "TestA", 1}, {"p/c", "TestC", 2},
	}, 3)
	want := []result{{"p/a", "TestZ", 3}, {"p/c", "TestC", 2}, {"p/a", "TestA", 1}}
	if len(got) != len(want) {
		t.Fatalf("got %v, want %v", got, want)
	}
	for i := range want {
		if got[i] != want[i] {
			t.Fatalf("got %v, want %v", got, want)
		}
	}
	if n := len(slowest(want, 10)); n != 3 {
		t.Fatalf("fewer results than asked: %d, want all 3", n)
	}
}
