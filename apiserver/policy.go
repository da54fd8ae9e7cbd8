package apiserver

import (
	"fmt"
	"net/http"
	"os"
	"slices"
	"strings"

	"gopkg.in/yaml.v3"

	"github.com/ironflow/ironflow/pyliteral"
)

// This file is the policy engine of the keystone auth strategy: oslo.policy's
// check-string language (oslo.policy's "Policy rule expressions"
// documentation) evaluated over a caller's credentials and a target (the
// node's owner and lessee), with Ironic's default rules
// (ironic/common/policy.py) in policy_defaults.go and operator overrides
// read from a policy file with the same rule names.

// creds are what a validated token says about its caller: oslo.context's
// to_policy_values().
type creds struct {
	UserID          string
	UserName        string
	ProjectID       string
	ProjectName     string
	ProjectDomainID string
	// SystemScope is "all" for a system-scoped token.
	SystemScope string
	Roles       []string
}

func (c *creds) hasRole(r string) bool {
	for _, have := range c.Roles {
		if strings.EqualFold(have, r) {
			return true
		}
	}
	return false
}

// value is a credential by oslo's name, for generic checks (project_id:...).
func (c *creds) value(key string) (string, bool) {
	switch key {
	case "user_id":
		return c.UserID, true
	case "project_id":
		return c.ProjectID, c.ProjectID != ""
	case "project_name":
		return c.ProjectName, c.ProjectName != ""
	case "project_domain_id":
		if c.ProjectDomainID == "" {
			return "None", true
		}
		return c.ProjectDomainID, true
	case "system_scope":
		return c.SystemScope, c.SystemScope != ""
	}
	return "", false
}

// policyTarget is what a rule is checked against: "node.owner", "node.lessee",
// "allocation.owner", "config.service_project_name". A missing or empty key
// never matches.
type policyTarget map[string]string

// check is one parsed check string.
type check interface {
	eval(e *policyEngine, c *creds, t policyTarget, depth int) bool
}

type (
	alwaysCheck  bool
	notCheck     struct{ c check }
	andCheck     []check
	orCheck      []check
	ruleCheck    string
	roleCheck    string
	genericCheck struct{ key, match string }
)

func (a alwaysCheck) eval(*policyEngine, *creds, policyTarget, int) bool { return bool(a) }
func (n notCheck) eval(e *policyEngine, c *creds, t policyTarget, d int) bool {
	return !n.c.eval(e, c, t, d)
}
func (a andCheck) eval(e *policyEngine, c *creds, t policyTarget, d int) bool {
	for _, x := range a {
		if !x.eval(e, c, t, d) {
			return false
		}
	}
	return true
}
func (o orCheck) eval(e *policyEngine, c *creds, t policyTarget, d int) bool {
	for _, x := range o {
		if x.eval(e, c, t, d) {
			return true
		}
	}
	return false
}

// eval of rule:NAME: an unknown rule fails, as in oslo.policy; the depth
// cap stops a policy file whose rules refer to each other in a loop.
func (r ruleCheck) eval(e *policyEngine, c *creds, t policyTarget, d int) bool {
	rc, ok := e.rules[string(r)]
	if !ok || d > 32 {
		return false
	}
	return rc.eval(e, c, t, d+1)
}

func (r roleCheck) eval(_ *policyEngine, c *creds, t policyTarget, _ int) bool {
	role, ok := substitute(string(r), t)
	return ok && c.hasRole(role)
}

func (g genericCheck) eval(_ *policyEngine, c *creds, t policyTarget, _ int) bool {
	want, ok := substitute(g.match, t)
	if !ok {
		return false
	}
	if len(want) >= 2 && (want[0] == '\'' || want[0] == '"') && want[len(want)-1] == want[0] {
		want = want[1 : len(want)-1]
	}
	have, ok := c.value(g.key)
	if !ok {
		return false
	}
	return strings.EqualFold(want, "true") && strings.EqualFold(have, "true") || have == want
}

// substitute replaces a whole-string %(key)s with the target's value.
func substitute(s string, t policyTarget) (string, bool) {
	if strings.HasPrefix(s, "%(") && strings.HasSuffix(s, ")s") {
		v := t[s[2:len(s)-2]]
		return v, v != ""
	}
	return s, true
}

// parseCheck parses an oslo.policy check string. "" and "@" always pass,
// "!" never does.
func parseCheck(s string) (check, error) {
	p := &checkParser{toks: tokenize(s)}
	if len(p.toks) == 0 {
		return alwaysCheck(true), nil
	}
	c, err := p.or()
	if err != nil {
		return nil, fmt.Errorf("check %q: %w", s, err)
	}
	if p.i != len(p.toks) {
		return nil, fmt.Errorf("check %q: unexpected %q", s, p.toks[p.i])
	}
	return c, nil
}

func tokenize(s string) []string {
	var toks []string
	for _, f := range strings.Fields(s) {
		for strings.HasPrefix(f, "(") {
			toks, f = append(toks, "("), f[1:]
		}
		closing := 0
		for strings.HasSuffix(f, ")") && !strings.HasSuffix(f, ")s") {
			f, closing = f[:len(f)-1], closing+1
		}
		if f != "" {
			toks = append(toks, f)
		}
		for ; closing > 0; closing-- {
			toks = append(toks, ")")
		}
	}
	return toks
}

type checkParser struct {
	toks []string
	i    int
}

func (p *checkParser) peek() string {
	if p.i < len(p.toks) {
		return p.toks[p.i]
	}
	return ""
}

func (p *checkParser) or() (check, error) {
	var alts orCheck
	for {
		c, err := p.and()
		if err != nil {
			return nil, err
		}
		alts = append(alts, c)
		if !strings.EqualFold(p.peek(), "or") {
			break
		}
		p.i++
	}
	if len(alts) == 1 {
		return alts[0], nil
	}
	return alts, nil
}

func (p *checkParser) and() (check, error) {
	var all andCheck
	for {
		c, err := p.unary()
		if err != nil {
			return nil, err
		}
		all = append(all, c)
		if !strings.EqualFold(p.peek(), "and") {
			break
		}
		p.i++
	}
	if len(all) == 1 {
		return all[0], nil
	}
	return all, nil
}

func (p *checkParser) unary() (check, error) {
	tok := p.peek()
	switch {
	case tok == "":
		return nil, fmt.Errorf("unexpected end")
	case strings.EqualFold(tok, "not"):
		p.i++
		c, err := p.unary()
		if err != nil {
			return nil, err
		}
		return notCheck{c}, nil
	case tok == "(":
		p.i++
		c, err := p.or()
		if err != nil {
			return nil, err
		}
		if p.peek() != ")" {
			return nil, fmt.Errorf("missing )")
		}
		p.i++
		return c, nil
	}
	p.i++
	switch tok {
	case "@":
		return alwaysCheck(true), nil
	case "!":
		return alwaysCheck(false), nil
	}
	kind, match, ok := strings.Cut(tok, ":")
	if !ok {
		return nil, fmt.Errorf("bad check %q", tok)
	}
	switch kind {
	case "rule":
		return ruleCheck(match), nil
	case "role":
		return roleCheck(match), nil
	}
	return genericCheck{key: kind, match: match}, nil
}

// policyEngine holds the parsed rules by name.
type policyEngine struct {
	rules map[string]check
	// scopes are the rule's scope_types (Ironic's enforce_scope is on):
	// a token of another scope fails the rule.
	scopes map[string][]string
	// defaults are the default check strings: what InvalidScope's text
	// shows of a rule (oslo.policy's RuleDefault), even when a policy
	// file overrides it.
	defaults map[string]string
	// serviceProject is Ironic's [DEFAULT]rbac_service_project_name.
	serviceProject string
}

// newPolicyEngine parses Ironic's defaults and then the overrides of
// policyFile (YAML or JSON: rule name → check string), if any.
func newPolicyEngine(policyFile string) (*policyEngine, error) {
	e := &policyEngine{rules: map[string]check{}, scopes: map[string][]string{}, defaults: map[string]string{}, serviceProject: "service"}
	for _, r := range append(slices.Clip(ironicDefaultRules), ironflowDefaultRules...) {
		c, err := parseCheck(r.check)
		if err != nil {
			return nil, fmt.Errorf("default rule %s: %w", r.name, err)
		}
		e.rules[r.name] = c
		e.scopes[r.name] = r.scopes
		e.defaults[r.name] = r.check
	}
	if policyFile == "" {
		return e, nil
	}
	data, err := os.ReadFile(policyFile)
	if err != nil {
		return nil, fmt.Errorf("read policy file: %w", err)
	}
	var overrides map[string]string
	if err := yaml.Unmarshal(data, &overrides); err != nil {
		return nil, fmt.Errorf("policy file %s: want a map of rule name to check string: %w", policyFile, err)
	}
	for name, s := range overrides {
		c, err := parseCheck(s)
		if err != nil {
			return nil, fmt.Errorf("policy file %s: rule %s: %w", policyFile, name, err)
		}
		e.rules[name] = c
	}
	return e, nil
}

// allowed evaluates rule for c on t. A token whose scope the rule does not
// list fails it (oslo.policy's InvalidScope with enforce_scope on).
func (e *policyEngine) allowed(rule string, c *creds, t policyTarget) bool {
	rc, ok := e.rules[rule]
	if !ok {
		return false
	}
	if sc := e.scopes[rule]; len(sc) > 0 {
		scope := "project"
		if c.SystemScope == "all" {
			scope = "system"
		}
		in := false
		for _, s := range sc {
			in = in || s == scope
		}
		if !in {
			return false
		}
	}
	full := policyTarget{"config.service_project_name": e.serviceProject}
	for k, v := range t {
		full[k] = v
	}
	return rc.eval(e, c, full, 0)
}

// authorize is Ironic's policy.authorize: nil when rule allows c on t,
// else Ironic's HTTPForbidden naming the rule. A token whose scope the
// rule's scope_types do not list is refused with oslo.policy's InvalidScope
// text (enforce_scope is on). Ironic's authorize does not catch
// InvalidScope, so its API answers a server error (500), as the
// project-scoped cases of Ironic's RBAC tests (test_rbac_project_scoped.yaml:
// chassis, drivers) record; a token of the wrong scope is the client's
// mistake, so ironflow answers 403 with the same text (docs/security.md).
func (e *policyEngine) authorize(rule string, c *creds, t policyTarget) error {
	if sc := e.scopes[rule]; len(sc) > 0 {
		token := tokenScope(c)
		if !slices.Contains(sc, token) {
			return errorf(http.StatusForbidden, `"%s": "%s" requires a scope of %s, request was made with %s scope.`,
				rule, e.defaults[rule], pyliteral.Repr(anyStrings(sc)), token)
		}
	}
	if !e.allowed(rule, c, t) {
		return forbidden(rule)
	}
	return nil
}

// tokenScope is oslo.policy's token_scope of c: system or project.
func tokenScope(c *creds) string {
	if c.SystemScope == "all" {
		return "system"
	}
	return "project"
}

func anyStrings(ss []string) []any {
	out := make([]any, len(ss))
	for i, s := range ss {
		out[i] = s
	}
	return out
}
