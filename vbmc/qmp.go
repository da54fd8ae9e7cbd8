package vbmc

import (
	"bufio"
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"net"
	"time"
)

// DefaultQMPTimeout bounds one QMP session (connect, negotiate, commands).
// QEMU's monitor serves one client at a time, so a stuck session would block
// every other BMC call for the VM.
const DefaultQMPTimeout = 10 * time.Second

// qmpConn is one QMP session on a VM's monitor socket.
type qmpConn struct {
	conn   net.Conn
	r      *bufio.Reader
	events []qmpMessage
}

type qmpMessage struct {
	Return json.RawMessage `json:"return"`
	Error  *struct {
		Class string `json:"class"`
		Desc  string `json:"desc"`
	} `json:"error"`
	Event string          `json:"event"`
	Data  json.RawMessage `json:"data"`
	QMP   json.RawMessage `json:"QMP"`
}

// dialQMP connects to the monitor and leaves capabilities negotiation done.
func dialQMP(ctx context.Context, socket string) (*qmpConn, error) {
	deadline := time.Now().Add(DefaultQMPTimeout)
	if d, ok := ctx.Deadline(); ok && d.Before(deadline) {
		deadline = d
	}
	var d net.Dialer
	dctx, cancel := context.WithDeadline(ctx, deadline)
	defer cancel()
	conn, err := d.DialContext(dctx, "unix", socket)
	if err != nil {
		return nil, fmt.Errorf("connect to QMP %s: %w", socket, err)
	}
	_ = conn.SetDeadline(deadline)
	q := &qmpConn{conn: conn, r: bufio.NewReader(conn)}
	greeting, err := q.read()
	if err != nil {
		conn.Close()
		return nil, fmt.Errorf("read QMP greeting: %w", err)
	}
	if greeting.QMP == nil {
		conn.Close()
		return nil, errors.New("QMP greeting missing")
	}
	if _, err := q.execute("qmp_capabilities", nil); err != nil {
		conn.Close()
		return nil, err
	}
	return q, nil
}

func (q *qmpConn) Close() error { return q.conn.Close() }

func (q *qmpConn) read() (qmpMessage, error) {
	line, err := q.r.ReadBytes('\n')
	if err != nil {
		return qmpMessage{}, err
	}
	var m qmpMessage
	if err := json.Unmarshal(line, &m); err != nil {
		return qmpMessage{}, fmt.Errorf("decode QMP message %q: %w", line, err)
	}
	return m, nil
}

// execute runs one command and returns its "return" value. Events that
// arrive meanwhile are kept for waitEvent.
func (q *qmpConn) execute(cmd string, args any) (json.RawMessage, error) {
	req := map[string]any{"execute": cmd}
	if args != nil {
		req["arguments"] = args
	}
	b, err := json.Marshal(req)
	if err != nil {
		return nil, fmt.Errorf("encode QMP %s: %w", cmd, err)
	}
	if _, err := q.conn.Write(append(b, '\n')); err != nil {
		return nil, fmt.Errorf("send QMP %s: %w", cmd, err)
	}
	for {
		m, err := q.read()
		if err != nil {
			return nil, fmt.Errorf("QMP %s: %w", cmd, err)
		}
		switch {
		case m.Event != "":
			q.events = append(q.events, m)
		case m.Error != nil:
			return nil, fmt.Errorf("QMP %s: %s: %s", cmd, m.Error.Class, m.Error.Desc)
		default:
			return m.Return, nil
		}
	}
}

// waitEvent returns once the named event was seen on this session (before
// or after the command that caused it answered).
func (q *qmpConn) waitEvent(name string) error {
	for _, e := range q.events {
		if e.Event == name {
			return nil
		}
	}
	for {
		m, err := q.read()
		if err != nil {
			return fmt.Errorf("wait for QMP event %s: %w", name, err)
		}
		if m.Event == name {
			return nil
		}
	}
}

// qmpDo opens a session, runs fn and closes the session.
func qmpDo(ctx context.Context, socket string, fn func(q *qmpConn) error) error {
	q, err := dialQMP(ctx, socket)
	if err != nil {
		return err
	}
	defer q.Close()
	return fn(q)
}
