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
// also be set as IRONFLOW_FOO_BAR (the flag wins). The README's
// configuration table lists them.
type settings struct {
	fs *flag.FlagSet
}

func newSettings(name string) *settings {
	fs := flag.NewFlagSet("ironflow "+name, flag.ContinueOnError)
	return &settings{fs: fs}
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
	if v := s.env(name, fallbackEnv...); v != "" {
		def = v
	}
	return s.fs.String(name, def, usage+" (env "+envName(name)+")")
}

func (s *settings) Int(name string, def int, usage string) *int {
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
