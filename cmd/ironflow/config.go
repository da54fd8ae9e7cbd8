package main

import (
	"flag"
	"fmt"
	"os"
	"strconv"
	"strings"
	"time"
)

// settings binds flags to environment variables: every flag --foo-bar can
// also be set as IRONFLOW_FOO_BAR (the flag wins). docs/configuration.md
// lists them, generated from these FlagSets (flagdocs_test.go).
type settings struct {
	fs *flag.FlagSet
	// docs is what docs/configuration.md says of each flag: the default
	// the code gives it (the FlagSet's holds the environment's value) and
	// the environment variables read.
	docs map[string]flagDoc
}

type flagDoc struct {
	def   string
	env   []string
	prose bool // def is words, not a value
}

func newSettings(name string) *settings {
	fs := flag.NewFlagSet("ironflow "+name, flag.ContinueOnError)
	return &settings{fs: fs, docs: map[string]flagDoc{}}
}

func (s *settings) document(name, def string, fallbackEnv ...string) {
	env := []string{envName(name)}
	for _, e := range fallbackEnv {
		if e != env[0] {
			env = append(env, e)
		}
	}
	s.docs[name] = flagDoc{def: def, env: env}
}

// defaultText documents a default the code computes on the running
// machine (the host name), so that the docs do not show one machine's.
func (s *settings) defaultText(name, text string) {
	d := s.docs[name]
	d.def, d.prose = text, true
	s.docs[name] = d
}

func envName(flagName string) string {
	return "IRONFLOW_" + strings.ToUpper(strings.ReplaceAll(flagName, "-", "_"))
}

func (s *settings) env(name string, fallback ...string) string {
	if v, ok := os.LookupEnv(envName(name)); ok {
		return v
	}
	for _, f := range fallback {
		if v, ok := os.LookupEnv(f); ok {
			return v
		}
	}
	return ""
}

func (s *settings) String(name, def, usage string, fallbackEnv ...string) *string {
	s.document(name, def, fallbackEnv...)
	if v := s.env(name, fallbackEnv...); v != "" {
		def = v
	}
	return s.fs.String(name, def, usage+" (env "+envName(name)+")")
}

func (s *settings) Int(name string, def int, usage string) *int {
	s.document(name, strconv.Itoa(def))
	if v := s.env(name); v != "" {
		if n, err := strconv.Atoi(v); err == nil {
			def = n
		} else {
			fmt.Fprintf(os.Stderr, "ironflow: ignoring %s=%q: not a number\n", envName(name), v)
		}
	}
	return s.fs.Int(name, def, usage+" (env "+envName(name)+")")
}

func (s *settings) Bool(name string, def bool, usage string) *bool {
	s.document(name, strconv.FormatBool(def))
	if v := s.env(name); v != "" {
		if b, err := strconv.ParseBool(v); err == nil {
			def = b
		} else {
			fmt.Fprintf(os.Stderr, "ironflow: ignoring %s=%q: not a boolean\n", envName(name), v)
		}
	}
	return s.fs.Bool(name, def, usage+" (env "+envName(name)+")")
}

func (s *settings) Duration(name string, def time.Duration, usage string) *time.Duration {
	s.document(name, def.String())
	if v := s.env(name); v != "" {
		if d, err := time.ParseDuration(v); err == nil {
			def = d
		} else {
			fmt.Fprintf(os.Stderr, "ironflow: ignoring %s=%q: not a duration like 30m\n", envName(name), v)
		}
	}
	return s.fs.Duration(name, def, usage+" (env "+envName(name)+")")
}

func (s *settings) parse(args []string) error { return s.fs.Parse(args) }
