package workflows

import (
	"fmt"
	"time"
)

// SignalReplayWindow is how long a workflow remembers the signed heartbeats
// it accepted. The worker accepts a signal at most signature.MaxAge old and
// signature.MaxSkew ahead of its clock, so a signal forgotten after this
// window can no longer pass the worker's check: it is refused as too old
// there, or here as older than what the workflow forgot (floor). It must be
// at least MaxAge+MaxSkew (signature's tests check).
const SignalReplayWindow = 6 * time.Minute

// maxRememberedSignals bounds the ledger whatever the heartbeat rate: when
// it is full the oldest entry is forgotten and raises the floor.
const maxRememberedSignals = 1024

// signalLedger is what a workflow remembers of the signed heartbeats it
// accepted, so that a signal captured from its history (every signal is
// visible there) and sent again changes nothing: a nonce already seen, or a
// timestamp at or before the newest one forgotten, is a replay. It is
// workflow state, rebuilt the same on every replay of the history from the
// signals and their recorded verdicts.
type signalLedger struct {
	seen   []seenSignal
	floor  time.Time // signals at or before it are refused (zero: none forgotten yet)
	newest time.Time
}

type seenSignal struct {
	nonce string
	at    time.Time
}

// admit returns why hb is a replay of a signal the workflow accepted, or ""
// after remembering it. The nonce identifies a signal: the MAC covers its
// exact spelling, so it cannot be altered without failing verification.
func (l *signalLedger) admit(hb Heartbeat) string {
	if !l.floor.IsZero() && !hb.ReceivedAt.After(l.floor) {
		return fmt.Sprintf("signed at %s, not after the signals this workflow has forgotten (%s)",
			hb.ReceivedAt.Format(time.RFC3339Nano), l.floor.Format(time.RFC3339Nano))
	}
	for _, s := range l.seen {
		if s.nonce == hb.Nonce {
			return fmt.Sprintf("nonce %s was already accepted (signed at %s)", hb.Nonce, s.at.Format(time.RFC3339Nano))
		}
	}
	l.seen = append(l.seen, seenSignal{nonce: hb.Nonce, at: hb.ReceivedAt})
	if hb.ReceivedAt.After(l.newest) {
		l.newest = hb.ReceivedAt
	}
	cutoff := l.newest.Add(-SignalReplayWindow)
	kept := l.seen[:0]
	for _, s := range l.seen {
		if s.at.Before(cutoff) {
			l.forget(s)
			continue
		}
		kept = append(kept, s)
	}
	l.seen = kept
	for len(l.seen) > maxRememberedSignals {
		oldest := 0
		for i, s := range l.seen {
			if s.at.Before(l.seen[oldest].at) {
				oldest = i
			}
		}
		l.forget(l.seen[oldest])
		l.seen = append(l.seen[:oldest], l.seen[oldest+1:]...)
	}
	return ""
}

func (l *signalLedger) forget(s seenSignal) {
	if s.at.After(l.floor) {
		l.floor = s.at
	}
}
