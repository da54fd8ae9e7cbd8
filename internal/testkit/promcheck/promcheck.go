// Package promcheck reads Prometheus scrapes for ironflow's tests: a
// process's /metrics fetched, linted by `promtool check metrics` (Debian's
// prometheus, in make test's set of scripts/install-deps.sh) and summed
// by series and labels.
package promcheck

import (
	"bytes"
	"errors"
	"fmt"
	"io"
	"net/http"
	"os/exec"
	"strings"
	"time"

	dto "github.com/prometheus/client_model/go"
	"github.com/prometheus/common/expfmt"
	"github.com/prometheus/common/model"
)

// ErrNoPromtool: promtool is not installed; a test says so loudly.
var ErrNoPromtool = errors.New("promtool is missing: scripts/install-deps.sh test installs Debian's prometheus")

// Scrape fetches url (a process's /metrics) as Prometheus does.
func Scrape(url string) ([]byte, error) {
	c := &http.Client{Timeout: 30 * time.Second}
	resp, err := c.Get(url)
	if err != nil {
		return nil, fmt.Errorf("scrape %s: %w", url, err)
	}
	defer resp.Body.Close()
	body, err := io.ReadAll(resp.Body)
	if err == nil && resp.StatusCode != http.StatusOK {
		err = fmt.Errorf("HTTP %d", resp.StatusCode)
	}
	if err != nil {
		return nil, fmt.Errorf("scrape %s: %w", url, err)
	}
	return body, nil
}

// Lint runs `promtool check metrics` on a scrape: nil when it passes,
// ErrNoPromtool when promtool is missing, else promtool's complaints.
func Lint(body []byte) error {
	promtool, err := exec.LookPath("promtool")
	if err != nil {
		return ErrNoPromtool
	}
	cmd := exec.Command(promtool, "check", "metrics")
	cmd.Stdin = bytes.NewReader(body)
	if out, err := cmd.CombinedOutput(); err != nil {
		return fmt.Errorf("promtool check metrics: %v\n%s", err, out)
	}
	return nil
}

// Families are a parsed scrape, by metric name.
type Families map[string]*dto.MetricFamily

// Parse reads a scrape in Prometheus's text format.
func Parse(body []byte) (Families, error) {
	p := expfmt.NewTextParser(model.UTF8Validation)
	fams, err := p.TextToMetricFamilies(bytes.NewReader(body))
	if err != nil {
		return nil, fmt.Errorf("parse a scrape: %w", err)
	}
	return fams, nil
}

// Sum adds up the samples of name whose labels hold every want
// ("label=value"): a counter's or a gauge's value, a histogram's count. A
// series nothing has touched sums to 0.
func (f Families) Sum(name string, want ...string) float64 {
	sum := 0.0
samples:
	for _, m := range f[name].GetMetric() {
		labels := map[string]string{}
		for _, l := range m.GetLabel() {
			labels[l.GetName()] = l.GetValue()
		}
		for _, w := range want {
			k, v, _ := strings.Cut(w, "=")
			if labels[k] != v {
				continue samples
			}
		}
		sum += m.GetCounter().GetValue() + m.GetGauge().GetValue() + float64(m.GetHistogram().GetSampleCount())
	}
	return sum
}
