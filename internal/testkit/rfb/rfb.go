// Package rfb holds tests' own minimal clients of the real parts a
// graphical console is checked against: RFB (RFC 6143) through a proxy,
// and QEMU's QMP monitor for its screendump (docs/console.md, "Tests").
package rfb

import (
	"bufio"
	"bytes"
	"context"
	"encoding/binary"
	"encoding/json"
	"fmt"
	"io"
	"net"
	"os"
	"strconv"
	"time"
)

// Frame is an RGB picture, 3 bytes a pixel.
type Frame struct {
	W, H int
	RGB  []byte
}

// ReadFrame does the RFB 3.8 handshake with security type None, asks for
// 32-bit true colour pixels in raw encoding, and returns one full
// framebuffer update.
func ReadFrame(conn io.ReadWriter) (Frame, string, error) {
	r := bufio.NewReader(conn)
	ver := make([]byte, 12)
	if _, err := io.ReadFull(r, ver); err != nil {
		return Frame{}, "", fmt.Errorf("read ProtocolVersion: %w", err)
	}
	if !bytes.HasPrefix(ver, []byte("RFB 003.")) {
		return Frame{}, "", fmt.Errorf("not RFB: %q", ver)
	}
	conn.Write([]byte("RFB 003.008\n"))
	n, err := r.ReadByte()
	if err != nil || n == 0 {
		return Frame{}, "", fmt.Errorf("security types: %d %v", n, err)
	}
	types := make([]byte, n)
	io.ReadFull(r, types)
	if !bytes.Contains(types, []byte{1}) {
		return Frame{}, "", fmt.Errorf("security types %v lack None", types)
	}
	conn.Write([]byte{1})
	var result uint32
	if err := binary.Read(r, binary.BigEndian, &result); err != nil || result != 0 {
		return Frame{}, "", fmt.Errorf("SecurityResult %d %v", result, err)
	}
	conn.Write([]byte{1}) // ClientInit, shared
	var init struct {
		W, H   uint16
		PixFmt [16]byte
		Len    uint32
	}
	if err := binary.Read(r, binary.BigEndian, &init); err != nil {
		return Frame{}, "", fmt.Errorf("ServerInit: %w", err)
	}
	name := make([]byte, init.Len)
	io.ReadFull(r, name)

	var msg bytes.Buffer
	// SetPixelFormat: 32 bpp, depth 24, little-endian, true colour,
	// max 255 each, shifts 16/8/0 (so bytes B, G, R, X).
	msg.Write([]byte{0, 0, 0, 0, 32, 24, 0, 1, 0, 255, 0, 255, 0, 255, 16, 8, 0, 0, 0, 0})
	// SetEncodings: Raw only.
	msg.Write([]byte{2, 0, 0, 1, 0, 0, 0, 0})
	// FramebufferUpdateRequest, not incremental, the whole screen.
	msg.Write([]byte{3, 0, 0, 0, 0, 0})
	binary.Write(&msg, binary.BigEndian, [2]uint16{init.W, init.H})
	if _, err := conn.Write(msg.Bytes()); err != nil {
		return Frame{}, "", err
	}
	f := Frame{W: int(init.W), H: int(init.H), RGB: make([]byte, int(init.W)*int(init.H)*3)}
	for {
		typ, err := r.ReadByte()
		if err != nil {
			return Frame{}, "", fmt.Errorf("read server message: %w", err)
		}
		switch typ {
		case 2: // Bell
			continue
		case 0:
		default:
			return Frame{}, "", fmt.Errorf("unexpected server message type %d", typ)
		}
		var hdr struct {
			Pad   byte
			Rects uint16
		}
		binary.Read(r, binary.BigEndian, &hdr)
		for range hdr.Rects {
			var rect struct {
				X, Y, W, H uint16
				Enc        int32
			}
			if err := binary.Read(r, binary.BigEndian, &rect); err != nil {
				return Frame{}, "", err
			}
			if rect.Enc != 0 {
				return Frame{}, "", fmt.Errorf("rectangle in encoding %d, asked raw", rect.Enc)
			}
			px := make([]byte, int(rect.W)*int(rect.H)*4)
			if _, err := io.ReadFull(r, px); err != nil {
				return Frame{}, "", err
			}
			for y := range int(rect.H) {
				for x := range int(rect.W) {
					s := px[(y*int(rect.W)+x)*4:]
					d := f.RGB[((int(rect.Y)+y)*f.W+int(rect.X)+x)*3:]
					d[0], d[1], d[2] = s[2], s[1], s[0]
				}
			}
		}
		return f, string(name), nil
	}
}

// QMP is one session on a QEMU monitor socket.
type QMP struct {
	c net.Conn
	r *bufio.Reader
}

func DialQMP(socket string) (*QMP, error) {
	c, err := net.DialTimeout("unix", socket, 5*time.Second)
	if err != nil {
		return nil, err
	}
	q := &QMP{c: c, r: bufio.NewReader(c)}
	if _, err := q.r.ReadBytes('\n'); err != nil { // greeting
		c.Close()
		return nil, err
	}
	if _, err := q.Do("qmp_capabilities", nil); err != nil {
		c.Close()
		return nil, err
	}
	return q, nil
}

func (q *QMP) Do(cmd string, args map[string]any) (json.RawMessage, error) {
	q.c.SetDeadline(time.Now().Add(30 * time.Second))
	req, _ := json.Marshal(map[string]any{"execute": cmd, "arguments": args})
	if args == nil {
		req, _ = json.Marshal(map[string]any{"execute": cmd})
	}
	if _, err := q.c.Write(append(req, '\n')); err != nil {
		return nil, err
	}
	for {
		line, err := q.r.ReadBytes('\n')
		if err != nil {
			return nil, fmt.Errorf("QMP %s: %w", cmd, err)
		}
		var m struct {
			Return json.RawMessage
			Error  *struct{ Desc string }
		}
		json.Unmarshal(line, &m)
		switch {
		case m.Error != nil:
			return nil, fmt.Errorf("QMP %s: %s", cmd, m.Error.Desc)
		case m.Return != nil:
			return m.Return, nil
		}
	}
}

func (q *QMP) Close() { q.c.Close() }

// Screendump is QEMU's own picture of the display (a PPM file).
func (q *QMP) Screendump(path string) (Frame, error) {
	os.Remove(path)
	if _, err := q.Do("screendump", map[string]any{"filename": path}); err != nil {
		return Frame{}, err
	}
	b, err := os.ReadFile(path)
	if err != nil {
		return Frame{}, err
	}
	return ParsePPM(b)
}

// ParsePPM reads a binary PPM (P6, maxval 255) as QEMU writes it.
func ParsePPM(b []byte) (Frame, error) {
	fields := make([]string, 0, 4)
	i := 0
	for len(fields) < 4 && i < len(b) {
		for i < len(b) && (b[i] == ' ' || b[i] == '\n' || b[i] == '\t' || b[i] == '\r') {
			i++
		}
		start := i
		for i < len(b) && !(b[i] == ' ' || b[i] == '\n' || b[i] == '\t' || b[i] == '\r') {
			i++
		}
		fields = append(fields, string(b[start:i]))
	}
	i++ // the one whitespace byte after maxval
	if len(fields) != 4 || fields[0] != "P6" || fields[3] != "255" {
		return Frame{}, fmt.Errorf("not a P6 PPM: %q", fields)
	}
	w, _ := strconv.Atoi(fields[1])
	h, _ := strconv.Atoi(fields[2])
	if len(b)-i != w*h*3 {
		return Frame{}, fmt.Errorf("PPM %dx%d with %d pixel bytes", w, h, len(b)-i)
	}
	return Frame{W: w, H: h, RGB: b[i:]}, nil
}

// Inked counts the pixels that differ from the top-left one (the
// background): a blank screen has none.
func (f Frame) Inked() int {
	n := 0
	for p := 0; p+3 <= len(f.RGB); p += 3 {
		if !bytes.Equal(f.RGB[p:p+3], f.RGB[0:3]) {
			n++
		}
	}
	return n
}

// Differing counts the pixels in which two frames of the same size differ.
func Differing(a, b Frame) (int, error) {
	if a.W != b.W || a.H != b.H {
		return 0, fmt.Errorf("sizes %dx%d and %dx%d", a.W, a.H, b.W, b.H)
	}
	n := 0
	for p := 0; p+3 <= len(a.RGB); p += 3 {
		if !bytes.Equal(a.RGB[p:p+3], b.RGB[p:p+3]) {
			n++
		}
	}
	return n, nil
}

// WaitFor polls cond until it holds or ctx ends.
func WaitFor(ctx context.Context, what string, cond func() (bool, error)) error {
	var last error
	for {
		ok, err := cond()
		if ok {
			return nil
		}
		last = err
		select {
		case <-ctx.Done():
			return fmt.Errorf("%s: %w (last: %v)", what, ctx.Err(), last)
		case <-time.After(200 * time.Millisecond):
		}
	}
}
