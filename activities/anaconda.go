package activities

import (
	"context"
	"fmt"
	"io"
	"net/http"
	"strings"
	"time"

	"github.com/ironflow/ironflow/configdrive"
	"github.com/ironflow/ironflow/pxe"
	"github.com/ironflow/ironflow/store"
	"github.com/ironflow/ironflow/workflows"
)

// maxKickstartTemplate bounds a ks_template fetched from a URL.
const maxKickstartTemplate = 1 << 20

// prepareAnaconda sets up deploy_interface=anaconda: a pre-generated agent
// token (the kickstart's heartbeats carry it), the kickstart rendered from
// instance_info and the config drive and kept with the boot configuration
// (never in workflow history: it holds the token), and the installer's
// kernel, ramdisk and command line (inst.ks= pointing at the boot service).
func (a *Activities) prepareAnaconda(ctx context.Context, node workflows.NodeInfo) error {
	n, err := a.Store.GetNode(ctx, node.UUID)
	if err != nil {
		return storeErr(err, "load node %s", node.UUID)
	}
	str := func(k string) string { v, _ := n.InstanceInfo[k].(string); return v }
	kernel, ramdisk := str("kernel"), str("ramdisk")
	image := str("image_source")
	stage2 := str("stage2")
	if kernel == "" || ramdisk == "" || image == "" {
		return invalidConfig("node %s: deploy_interface anaconda needs instance_info kernel, ramdisk and image_source (and optionally stage2, ks_template)", node.UUID)
	}
	if len(node.MACs) == 0 {
		return invalidConfig("node %s has no port with pxe_enabled: create one with the MAC of its boot interface", node.UUID)
	}
	params := pxe.KickstartParams{
		NodeUUID: node.UUID, APIURL: a.Config.APIURL, ImageURL: image,
		ImageIsRepo:       strings.HasSuffix(image, "/"),
		RootPasswordHash:  str("root_password_hash"),
		InsecureHeartbeat: a.Config.AgentInsecure,
	}
	if cd := str("configdrive"); cd != "" && !strings.HasPrefix(cd, "http://") && !strings.HasPrefix(cd, "https://") {
		iso, err := configdrive.Decode(cd)
		if err != nil {
			return invalidConfig("node %s: configdrive: %v", node.UUID, err)
		}
		if params.ConfigDrive, err = pxe.ConfigDriveFiles(iso); err != nil {
			return invalidConfig("node %s: configdrive: %v", node.UUID, err)
		}
	}
	if tpl := str("ks_template"); tpl != "" {
		if params.Template, err = fetchTemplate(ctx, tpl); err != nil {
			return invalidConfig("node %s: ks_template: %v", node.UUID, err)
		}
	}
	token, err := store.NewAgentToken()
	if err != nil {
		return err
	}
	params.AgentToken = token
	ks, err := pxe.RenderKickstart(params)
	if err != nil {
		return invalidConfig("node %s: kickstart: %v", node.UUID, err)
	}
	if err := a.Store.DeleteDriverInternalInfoKeys(ctx, node.UUID, store.KeyAgentURL, store.KeyAgentVerifyCA); err != nil {
		return storeErr(err, "wipe agent url of node %s", node.UUID)
	}
	if err := a.Store.MergeDriverInternalInfo(ctx, node.UUID, map[string]any{
		store.KeyAgentToken: token, store.KeyAgentTokenPregenerated: true,
	}); err != nil {
		return storeErr(err, "store agent token of node %s", node.UUID)
	}
	cmdline := []string{"inst.ks=" + strings.TrimRight(a.Config.BootURL, "/") + "/boot/" + node.UUID + "/ks.cfg", "ip=dhcp"}
	if stage2 != "" {
		cmdline = append(cmdline, "inst.stage2="+stage2)
	}
	if extra := str("kernel_append_params"); extra != "" {
		cmdline = append(cmdline, extra)
	} else if a.Config.AgentKernelParams != "" {
		cmdline = append(cmdline, a.Config.AgentKernelParams)
	}
	err = a.Store.PutBootConfig(ctx, &store.BootConfig{
		NodeUUID: node.UUID, MACs: node.MACs, BootMode: node.BootMode, Method: store.BootMethodPXE,
		KernelURL: kernel, InitrdURL: ramdisk, KernelParams: strings.Join(cmdline, " "),
		Kind: store.BootKindAnaconda, Kickstart: ks,
	})
	return storeErr(err, "store boot configuration of node %s", node.UUID)
}

// fetchTemplate reads ks_template: the template itself, or a URL to it.
func fetchTemplate(ctx context.Context, v string) (string, error) {
	if !strings.HasPrefix(v, "http://") && !strings.HasPrefix(v, "https://") {
		return v, nil
	}
	ctx, cancel := context.WithTimeout(ctx, 30*time.Second)
	defer cancel()
	req, err := http.NewRequestWithContext(ctx, http.MethodGet, v, nil)
	if err != nil {
		return "", err
	}
	resp, err := http.DefaultClient.Do(req)
	if err != nil {
		return "", fmt.Errorf("fetch %s: %w", redactURL(v), err)
	}
	defer resp.Body.Close()
	if resp.StatusCode != http.StatusOK {
		return "", fmt.Errorf("fetch %s: HTTP %d", redactURL(v), resp.StatusCode)
	}
	b, err := io.ReadAll(io.LimitReader(resp.Body, maxKickstartTemplate+1))
	if err != nil {
		return "", fmt.Errorf("fetch %s: %w", redactURL(v), err)
	}
	if len(b) > maxKickstartTemplate {
		return "", fmt.Errorf("template at %s is larger than 1 MiB", redactURL(v))
	}
	return string(b), nil
}
