package pxe

import (
	"bytes"
	"encoding/base64"
	"encoding/json"
	"errors"
	"fmt"
	"io/fs"
	"net/url"
	"os"
	"path"
	"regexp"
	"sort"
	"strings"
	"text/template"

	"github.com/diskfs/go-diskfs/backend/file"
	"github.com/diskfs/go-diskfs/filesystem/iso9660"
	"github.com/google/uuid"
)

// KickstartAPIVersion is the microversion the kickstart's heartbeats ask
// for: 1.72 added agent_status, which is how anaconda reports start, end
// and error (as Ironic's anaconda deploy interface does).
const KickstartAPIVersion = "1.72"

// ConfigDriveSeedDir is where the kickstart's %post writes the config
// drive's files in the installed system; cloud-init's ConfigDrive source
// reads a seed there when no config-2 device exists.
const ConfigDriveSeedDir = "/var/lib/cloud/seed/config_drive"

// Heartbeat agent_status values of an anaconda deploy.
const (
	KickstartStatusStart = "start"
	KickstartStatusEnd   = "end"
	KickstartStatusError = "error"
)

// KickstartParams is what a node's kickstart is rendered from.
type KickstartParams struct {
	NodeUUID string
	// APIURL is ironflow's API as the installing machine reaches it;
	// heartbeats go to <APIURL>/v1/heartbeat/<node>.
	APIURL     string
	AgentToken string // one-time token of this deploy; never logged
	// ImageURL is installed with "liveimg --url" (a root filesystem tarball
	// or image), or with "url --url" when ImageIsRepo (an installation tree,
	// Ironic's is_source_a_path).
	ImageURL    string
	ImageIsRepo bool
	// RootPasswordHash is a crypt(3) hash for "rootpw --iscrypted"; empty
	// locks the root password.
	RootPasswordHash string
	// SSHKeys become "sshkey --username=root" lines. When empty, the
	// public_keys of the config drive's meta_data are used.
	SSHKeys []string
	// ConfigDrive is the config drive's files by path inside the drive
	// ("openstack/latest/meta_data.json"), as ConfigDriveFiles reads them;
	// %post writes them under ConfigDriveSeedDir, as Ironic does.
	ConfigDrive map[string][]byte
	// InsecureHeartbeat lets curl accept an API certificate it cannot verify.
	InsecureHeartbeat bool
	// Template is a user kickstart template (ks_template, fetched by the
	// caller) in Go text/template syntax with KickstartData's fields and
	// the functions heartbeat and shquote; empty uses DefaultKickstartTemplate.
	Template string
}

// KickstartData is what a kickstart template sees.
type KickstartData struct {
	NodeUUID          string
	HeartbeatURL      string
	AgentToken        string
	ImageURL          string
	ImageIsRepo       bool
	InsecureHeartbeat bool
	RootPasswordHash  string
	SSHKeys           []string
	// ConfigDrive is the rendered %post section writing the config drive,
	// empty without one.
	ConfigDrive string
}

// DefaultKickstartTemplate follows Ironic's ks.cfg.template: a text-mode,
// non-interactive install of the whole first disk, the image from liveimg
// (or url), and heartbeats in %pre, %onerror and as the very last %post so
// that ironflow does not reboot the machine before anaconda is done.
const DefaultKickstartTemplate = `# ironflow kickstart for node {{.NodeUUID}}
lang en_US
keyboard us
timezone UTC --utc
text
cmdline
reboot
selinux --enforcing
firewall --disabled
firstboot --disabled
{{if .RootPasswordHash}}rootpw --iscrypted {{.RootPasswordHash}}{{else}}rootpw --lock{{end}}
{{range .SSHKeys}}sshkey --username=root "{{.}}"
{{end}}
bootloader --location=mbr --append="rhgb quiet crashkernel=auto"
zerombr
clearpart --all --initlabel
autopart

{{if .ImageIsRepo -}}
url --url={{.ImageURL}}

# A URL-based install fails without a package selection.
%packages --ignoremissing
%end
{{- else -}}
liveimg --url={{.ImageURL}}
{{- end}}

%pre
{{heartbeat "start" "Deployment starting. Running pre-installation scripts."}}
%end

%onerror
{{heartbeat "error" "Error: Deploying using anaconda. Check console for more information."}}
%end
{{.ConfigDrive}}
# The end heartbeat must come last: ironflow reboots the machine on it.
%post
sync
{{heartbeat "end" "Deployment completed successfully."}}
%end
`

var (
	errKickstartParam = errors.New("invalid kickstart parameter")
	// tokenRE: the token is pasted into a single-quoted shell word and a
	// JSON string; ironflow's tokens are URL-safe base64.
	tokenRE = regexp.MustCompile(`^[A-Za-z0-9._~-]+$`)
	// drivePathRE: config drive paths go into shell words unquoted by
	// Ironic's template; keep them to what a config drive holds.
	drivePathRE = regexp.MustCompile(`^[A-Za-z0-9_.-]+(/[A-Za-z0-9_.-]+)*$`)
)

// RenderKickstart renders the node's kickstart. Values that could change
// the file's structure (line breaks, quotes in the image URL, shell
// metacharacters in the token) are refused rather than escaped. Errors never
// contain the agent token.
func RenderKickstart(p KickstartParams) (string, error) {
	id, err := uuid.Parse(p.NodeUUID)
	if err != nil {
		return "", fmt.Errorf("render kickstart: node UUID %q: %w", p.NodeUUID, err)
	}
	fail := func(format string, a ...any) error {
		return fmt.Errorf("render kickstart for node %s: %w: %s", id, errKickstartParam, fmt.Sprintf(format, a...))
	}
	api, err := checkKickstartURL(p.APIURL, "http", "https")
	if err != nil {
		return "", fail("API URL: %v", err)
	}
	if _, err := checkKickstartURL(p.ImageURL, "http", "https", "ftp", "nfs", "file"); err != nil {
		return "", fail("image URL: %v", err)
	}
	if !tokenRE.MatchString(p.AgentToken) {
		return "", fail("agent token is empty or has characters outside [A-Za-z0-9._~-]")
	}
	if h := p.RootPasswordHash; h != "" && (strings.ContainsAny(h, " \t\"'\\") || hasControl(h) || !strings.HasPrefix(h, "$")) {
		return "", fail("root password hash is not a crypt(3) hash like $6$salt$hash")
	}
	keys := p.SSHKeys
	if len(keys) == 0 {
		if keys, err = configDriveKeys(p.ConfigDrive); err != nil {
			return "", fail("%v", err)
		}
	}
	for i, k := range keys {
		if strings.ContainsAny(k, "\"\\") || hasControl(k) || strings.TrimSpace(k) == "" {
			return "", fail("SSH key %d is empty or holds quotes, backslashes or line breaks", i)
		}
	}
	drive, err := configDriveSection(p.ConfigDrive)
	if err != nil {
		return "", fail("%v", err)
	}
	data := KickstartData{
		NodeUUID:          id.String(),
		HeartbeatURL:      strings.TrimSuffix(api.String(), "/") + "/v1/heartbeat/" + id.String(),
		AgentToken:        p.AgentToken,
		ImageURL:          p.ImageURL,
		ImageIsRepo:       p.ImageIsRepo,
		InsecureHeartbeat: p.InsecureHeartbeat,
		RootPasswordHash:  p.RootPasswordHash,
		SSHKeys:           keys,
		ConfigDrive:       drive,
	}
	src, name := p.Template, "ks_template"
	if src == "" {
		src, name = DefaultKickstartTemplate, "default kickstart template"
	}
	funcs := template.FuncMap{
		"heartbeat": func(status, message string) string { return heartbeatCommand(data, status, message) },
		"shquote":   shellQuote,
	}
	tmpl, err := template.New(name).Funcs(funcs).Option("missingkey=error").Parse(src)
	if err != nil {
		return "", fmt.Errorf("render kickstart for node %s: parse %s: %w", id, name, err)
	}
	var out bytes.Buffer
	if err := tmpl.Execute(&out, data); err != nil {
		return "", fmt.Errorf("render kickstart for node %s: execute %s: %w", id, name, redact(err, p.AgentToken))
	}
	ks := out.String()
	if err := checkKickstart(ks, data.HeartbeatURL); err != nil {
		return "", fmt.Errorf("render kickstart for node %s: %s: %w", id, name, err)
	}
	return ks, nil
}

// heartbeatCommand is the curl call anaconda runs to report status, with
// Ironic's headers and body; every value is one single-quoted shell word.
func heartbeatCommand(d KickstartData, status, message string) string {
	body, _ := json.Marshal(map[string]string{
		"callback_url":         "",
		"agent_token":          d.AgentToken,
		"agent_version":        "anaconda",
		"agent_status":         status,
		"agent_status_message": message,
	})
	insecure := ""
	if d.InsecureHeartbeat {
		insecure = " --insecure"
	}
	return "/usr/bin/curl -sS --fail" + insecure + " -X POST" +
		" -H 'Content-Type: application/json' -H 'Accept: application/json'" +
		" -H 'X-OpenStack-Ironic-API-Version: " + KickstartAPIVersion + "'" +
		" -d " + shellQuote(string(body)) + " " + shellQuote(d.HeartbeatURL)
}

// shellQuote makes s one POSIX shell word.
func shellQuote(s string) string {
	return "'" + strings.ReplaceAll(s, "'", `'\''`) + "'"
}

// configDriveSection writes each file of the drive from base64 in %post,
// sorted so that the kickstart is the same for the same drive.
func configDriveSection(files map[string][]byte) (string, error) {
	if len(files) == 0 {
		return "", nil
	}
	names := make([]string, 0, len(files))
	for n := range files {
		if !drivePathRE.MatchString(n) || strings.Contains("/"+n+"/", "/../") || strings.Contains("/"+n+"/", "/./") {
			return "", fmt.Errorf("config drive path %q", n)
		}
		names = append(names, n)
	}
	sort.Strings(names)
	var b strings.Builder
	b.WriteString("\n# The config drive, where cloud-init looks for a seed.\n%post\n")
	for _, n := range names {
		target := path.Join(ConfigDriveSeedDir, n)
		fmt.Fprintf(&b, "mkdir -p %s\n", path.Dir(target))
		fmt.Fprintf(&b, "echo '%s' | base64 -d > %s\n", base64.StdEncoding.EncodeToString(files[n]), target)
		fmt.Fprintf(&b, "chmod 600 %s\n", target)
	}
	b.WriteString("%end\n")
	return b.String(), nil
}

// configDriveKeys reads public_keys from the drive's latest meta_data.
func configDriveKeys(files map[string][]byte) ([]string, error) {
	raw, ok := files["openstack/latest/meta_data.json"]
	if !ok {
		return nil, nil
	}
	var meta struct {
		PublicKeys map[string]string `json:"public_keys"`
	}
	if err := json.Unmarshal(raw, &meta); err != nil {
		return nil, fmt.Errorf("config drive meta_data.json: %v", err)
	}
	names := make([]string, 0, len(meta.PublicKeys))
	for n := range meta.PublicKeys {
		names = append(names, n)
	}
	sort.Strings(names)
	keys := make([]string, 0, len(names))
	for _, n := range names {
		keys = append(keys, strings.TrimSpace(meta.PublicKeys[n]))
	}
	return keys, nil
}

func checkKickstartURL(v string, schemes ...string) (*url.URL, error) {
	if v == "" {
		return nil, errors.New("empty")
	}
	if hasControl(v) || strings.ContainsAny(v, " \t'\"\\`$") {
		return nil, errors.New("contains whitespace, quotes or shell characters")
	}
	u, err := url.Parse(v)
	if err != nil {
		return nil, err
	}
	ok := false
	for _, s := range schemes {
		ok = ok || u.Scheme == s
	}
	if !ok {
		return nil, fmt.Errorf("scheme %q: want one of %v", u.Scheme, schemes)
	}
	if u.Host == "" && u.Scheme != "file" {
		return nil, errors.New("no host")
	}
	return u, nil
}

func hasControl(s string) bool {
	for _, r := range s {
		if r < 0x20 || r == 0x7f || r == '\u2028' || r == '\u2029' {
			return true
		}
	}
	return false
}

// redact keeps the token out of a template execution error.
func redact(err error, token string) error {
	if token == "" || !strings.Contains(err.Error(), token) {
		return err
	}
	return errors.New(strings.ReplaceAll(err.Error(), token, "******"))
}

// checkKickstart refuses a kickstart ironflow cannot follow: without an
// image command nothing is installed, and without the heartbeats in %pre,
// %onerror and %post the deploy would wait for its callback timeout.
func checkKickstart(ks, heartbeatURL string) error {
	sections := KickstartSections(ks)
	for _, want := range []struct{ section, status string }{
		{"%pre", KickstartStatusStart}, {"%post", KickstartStatusEnd}, {"%onerror", KickstartStatusError},
	} {
		re := regexp.MustCompile(`agent_status\W+` + want.status + `\b`)
		found := false
		for _, body := range sections[want.section] {
			found = found || (strings.Contains(body, heartbeatURL) && re.MatchString(body))
		}
		if !found {
			return fmt.Errorf("no %s section posting agent_status %s to the heartbeat URL: ironflow would wait for its callback timeout", want.section, want.status)
		}
	}
	hasImage := false
	for _, line := range strings.Split(sections[""][0], "\n") {
		f := strings.Fields(line)
		if len(f) > 0 && (f[0] == "liveimg" || f[0] == "url") {
			hasImage = true
		}
	}
	if !hasImage {
		return errors.New("no liveimg or url command: nothing would be installed")
	}
	return nil
}

// kickstartSectionNames are the sections closed by %end; other % lines
// (%include, %ksappend) are commands.
var kickstartSectionNames = map[string]bool{
	"%pre": true, "%pre-install": true, "%post": true, "%onerror": true, "%traceback": true,
	"%packages": true, "%addon": true, "%anaconda": true,
}

// KickstartSections splits a kickstart into its command part (key "") and
// the bodies of its %pre, %post, %onerror, %packages, ... sections, in file
// order; a section header's options (--nochroot) are dropped. Installers
// (the test installer in tests/installer) run the bodies with sh.
func KickstartSections(ks string) map[string][]string {
	out := map[string][]string{"": {""}}
	var cur string
	var body []string
	in := false
	for _, line := range strings.Split(ks, "\n") {
		t := strings.TrimSpace(line)
		switch {
		case in && t == "%end":
			out[cur] = append(out[cur], strings.Join(body, "\n")+"\n")
			in, body = false, nil
		case in:
			body = append(body, line)
		case strings.HasPrefix(t, "%") && kickstartSectionNames[strings.Fields(t)[0]]:
			cur = strings.Fields(t)[0]
			in = true
		default:
			out[""][0] += line + "\n"
		}
	}
	return out
}

// ConfigDriveFiles reads the files of a config drive ISO (configdrive.Build,
// or configdrive.Decode of the string Ironic's API carries) for
// KickstartParams.ConfigDrive.
func ConfigDriveFiles(image []byte) (map[string][]byte, error) {
	tmp, err := os.CreateTemp("", "ironflow-configdrive-*.iso")
	if err != nil {
		return nil, fmt.Errorf("read config drive: %w", err)
	}
	defer os.Remove(tmp.Name())
	defer tmp.Close()
	if _, err := tmp.Write(image); err != nil {
		return nil, fmt.Errorf("read config drive: %w", err)
	}
	iso, err := iso9660.Read(file.New(tmp, true), int64(len(image)), 0, 2048)
	if err != nil {
		return nil, fmt.Errorf("read config drive: not an ISO 9660 image: %w", err)
	}
	out := map[string][]byte{}
	err = fs.WalkDir(iso, ".", func(p string, e fs.DirEntry, err error) error {
		if err != nil || e.IsDir() {
			return err
		}
		b, err := fs.ReadFile(iso, p)
		if err != nil {
			return err
		}
		out[p] = b
		return nil
	})
	if err != nil {
		return nil, fmt.Errorf("read config drive: %w", err)
	}
	return out, nil
}
