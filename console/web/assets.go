package web

import (
	"embed"
	"io/fs"
)

// assets holds the pages and their scripts; assets/xterm is xterm.js and
// its attach and fit addons as published on npm (assets/xterm/README.md
// names the releases and their integrity hashes).
//
//go:embed assets
var assets embed.FS

// assetFS is what /console/assets/ serves: the pages' files, not the pages
// themselves, which go through their token check (page).
func assetFS() fs.FS {
	sub, err := fs.Sub(assets, "assets")
	if err != nil {
		panic(err) // the embedded tree is fixed at build time
	}
	return htmlHidden{sub}
}

// htmlHidden hides the .html pages from the asset file server.
type htmlHidden struct{ fs.FS }

func (h htmlHidden) Open(name string) (fs.File, error) {
	if len(name) > 5 && name[len(name)-5:] == ".html" {
		return nil, fs.ErrNotExist
	}
	return h.FS.Open(name)
}
