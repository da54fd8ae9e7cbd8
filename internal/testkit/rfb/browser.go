package rfb

import (
	"context"
	"encoding/base64"
	"os/exec"
	"strconv"
	"strings"
	"testing"

	"github.com/chromedp/chromedp"
)

// Chromium starts Debian's Chromium, headless, with a throwaway profile and
// nothing that talks to the network on its own, and returns a tab.
func Chromium(t testing.TB) context.Context {
	t.Helper()
	path, err := exec.LookPath("chromium")
	if err != nil {
		t.Skipf("SKIP: chromium is not installed (Debian package chromium; scripts/install-deps.sh test installs it): %v", err)
	}
	opts := []chromedp.ExecAllocatorOption{
		chromedp.ExecPath(path),
		chromedp.Flag("headless", true),
		chromedp.NoSandbox, // CI runs as root
		chromedp.DisableGPU,
		chromedp.NoFirstRun,
		chromedp.Flag("disable-quic", true),
		chromedp.Flag("disable-background-networking", true),
		chromedp.Flag("disable-component-update", true),
		chromedp.Flag("disable-sync", true),
		chromedp.Flag("disable-dev-shm-usage", true),
		chromedp.UserDataDir(t.TempDir()),
		chromedp.WindowSize(1024, 600),
	}
	actx, cancelAlloc := chromedp.NewExecAllocator(context.Background(), opts...)
	ctx, cancelTab := chromedp.NewContext(actx)
	t.Cleanup(func() { cancelTab(); cancelAlloc() })
	if _, err := chromedp.Run(ctx, chromedp.Navigate("about:blank")); err != nil {
		t.Fatalf("start chromium: %v", err)
	}
	return ctx
}

// CanvasRGB reads noVNC's canvas back as RGB.
const CanvasRGB = `(() => {
  const c = document.querySelector("#screen canvas");
  if (!c || c.width < 2) return "";
  const d = c.getContext("2d").getImageData(0, 0, c.width, c.height).data;
  let s = c.width + "x" + c.height + ":";
  const rgb = new Uint8Array(c.width * c.height * 3);
  for (let i = 0, j = 0; i < d.length; i += 4) { rgb[j++] = d[i]; rgb[j++] = d[i+1]; rgb[j++] = d[i+2]; }
  let bin = "";
  for (let i = 0; i < rgb.length; i += 8192) bin += String.fromCharCode.apply(null, rgb.subarray(i, i + 8192));
  return s + btoa(bin);
})()`

// ParseCanvas decodes what CanvasRGB answers.
func ParseCanvas(s string) (Frame, bool) {
	dims, data, ok := strings.Cut(s, ":")
	if !ok {
		return Frame{}, false
	}
	w, h, ok := strings.Cut(dims, "x")
	if !ok {
		return Frame{}, false
	}
	var f Frame
	var err1, err2 error
	f.W, err1 = strconv.Atoi(w)
	f.H, err2 = strconv.Atoi(h)
	if err1 != nil || err2 != nil {
		return Frame{}, false
	}
	rgb, err := base64.StdEncoding.DecodeString(data)
	if err != nil || len(rgb) != f.W*f.H*3 {
		return Frame{}, false
	}
	f.RGB = rgb
	return f, true
}
