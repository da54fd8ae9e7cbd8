package web

import "github.com/ironflow/ironflow/internal/testkit/rfb"

// The RFB and QMP clients the graphical tests read screens with
// (internal/testkit/rfb, shared with the end-to-end tests).
type (
	frame = rfb.Frame
	qmp   = rfb.QMP
)

var (
	rfbFrame    = rfb.ReadFrame
	dialQMP     = rfb.DialQMP
	differing   = rfb.Differing
	waitFor     = rfb.WaitFor
	chromium    = rfb.Chromium
	parseCanvas = rfb.ParseCanvas
)

const canvasRGB = rfb.CanvasRGB
