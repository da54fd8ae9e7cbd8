package rules

import (
	"context"
	"fmt"
	"io"
	"math"
	"net/http"
	"time"
)

// HTTPGet is the api-call action's GET as Ironic's CallAPIHookAction makes
// it: a timeout per attempt, and up to Retries retries of 429, 500, 502,
// 503 and 504 answers (or failed connections), waiting backoff_factor ×
// 2^(n-1) seconds between them, as urllib3's Retry does. Any answer of 400
// or above left at the end fails the action.
func HTTPGet(client *http.Client) func(ctx context.Context, req APICall) error {
	return func(ctx context.Context, req APICall) error {
		var last error
		for attempt := 0; attempt <= req.Retries; attempt++ {
			if attempt > 1 {
				wait := time.Duration(req.BackoffFactor * math.Pow(2, float64(attempt-1)) * float64(time.Second))
				select {
				case <-ctx.Done():
					return ctx.Err()
				case <-time.After(wait):
				}
			}
			retry, err := getOnce(ctx, client, req)
			if err == nil {
				return nil
			}
			last = err
			if !retry {
				return err
			}
		}
		return last
	}
}

func getOnce(ctx context.Context, client *http.Client, req APICall) (retry bool, err error) {
	ctx, cancel := context.WithTimeout(ctx, time.Duration(req.TimeoutSecs*float64(time.Second)))
	defer cancel()
	r, err := http.NewRequestWithContext(ctx, http.MethodGet, req.URL, nil)
	if err != nil {
		return false, err
	}
	for k, v := range req.Headers {
		r.Header.Set(k, v)
	}
	resp, err := client.Do(r)
	if err != nil {
		return true, err
	}
	defer resp.Body.Close()
	_, _ = io.Copy(io.Discard, io.LimitReader(resp.Body, 1<<20))
	if resp.StatusCode >= 400 {
		switch resp.StatusCode {
		case 429, 500, 502, 503, 504:
			retry = true
		}
		return retry, fmt.Errorf("%d %s for url: %s", resp.StatusCode, http.StatusText(resp.StatusCode), req.URL)
	}
	return false, nil
}
