// Package qcow2 converts a qcow2 image to the raw disk it describes while
// the image is read as a stream, front to back, once: the agent writes a
// qcow2 image to its disk as it downloads, without a copy of the file in
// memory or on a scratch disk.
//
// The format is QEMU's, as its qcow2 specification (docs/interop/qcow2.txt
// in QEMU's source) defines it: versions 2 and 3, cluster sizes 512 B to
// 2 MiB, L1 and L2 tables, zlib (raw deflate) and zstd compressed clusters
// (the header's compression_type), zero-flag and unallocated clusters.
// Refcounts are not needed to read an image and are ignored; snapshots
// other than the active image are ignored too. Refused, each with an error
// naming the reason: backing files, external data files, encryption,
// extended L2 entries, unknown incompatible features, an image marked
// corrupt, a virtual size above Config.MaxSize, and any table or cluster
// reference that is out of bounds, overlaps a table, or lies beyond the end
// of the file.
//
// # Memory bound: a bounded reorder buffer, not range requests or a spill
//
// A stream is read in file order. Every table is located by something read
// earlier (the header locates the L1 table, the L1 table the L2 tables, an
// L2 table its data clusters), so the converter keeps a queue of the byte
// ranges it knows it will need, sorted by file offset, and consumes each as
// the stream reaches it: a table is parsed, a data cluster written to its
// guest offset, a compressed one inflated there. The queue holds one small
// entry per referenced cluster not yet reached.
//
// Bytes the stream passes before anything references them can only matter
// if a table not yet read may still point back at them. qemu-img (convert,
// create, and QEMU's own allocation when writing) allocates an L2 table
// before the data clusters it maps, so in the images users have the data
// comes after its table and nothing is kept. Images edited in place (COW of
// an L2 table after an internal snapshot, for example) may place a table
// after data it maps; for those the converter keeps the bytes it passes
// while some table still lies ahead, up to Config.ReorderLimit (default
// 16 MiB), and refuses with ErrReorderLimit beyond it, naming the way out
// (qemu-img convert -O qcow2 rewrites the image in order).
//
// Why not the alternatives: HTTP range requests would fetch the tables
// first, but tie the reader to HTTP servers honouring ranges (and to one
// transport) and cost a round trip per table; a spill to the target disk's
// tail beyond the virtual size would work only when the disk is larger
// than the image, and a spill in the ramdisk is memory again. In-order
// images need none of these, and out-of-order ones are rare and fixable.
//
// Memory is then bounded by the configuration, not by the image: the L1
// table (at most MaxL1Entries entries), the queue (at most MaxPending
// entries, grown once per table rather than append by append), the
// reorder buffer, and a few cluster-sized buffers (at most 2 MiB each):
// MemoryBound, 83 MiB, in all. Hostile images built to reach every bound
// at once hold 64 MiB of heap (memory_test.go measures each in a process
// of its own).
package qcow2

import (
	"bytes"
	"encoding/binary"
	"errors"
	"fmt"
	"io"
	"slices"
	"sort"

	"github.com/klauspost/compress/flate"
	"github.com/klauspost/compress/zstd"
)

// Errors a caller may test for; every error of Convert wraps one of them,
// or is the stream's or the writer's own.
var (
	// ErrUnsupported is an image feature the converter refuses (backing
	// file, encryption, external data file, extended L2 entries ...).
	ErrUnsupported = errors.New("unsupported qcow2 image")
	// ErrCorrupt is an image that breaks the format (bad offsets, tables
	// that overlap, clusters that do not inflate to a cluster).
	ErrCorrupt = errors.New("corrupt qcow2 image")
	// ErrTooLarge is a virtual size above Config.MaxSize.
	ErrTooLarge = errors.New("qcow2 image larger than the disk")
	// ErrReorderLimit is an image whose tables come after too much of
	// the data they map, or reference too many clusters ahead.
	ErrReorderLimit = errors.New("qcow2 image beyond the converter's memory bound")
)

// Magic opens every qcow2 file ("QFI\xfb").
var Magic = []byte{'Q', 'F', 'I', 0xfb}

// Limits independent of the configuration.
const (
	// MaxL1Entries bounds the L1 table held in memory (8 MiB). With
	// 64 KiB clusters it maps 64 TiB; images with tiny clusters and huge
	// virtual sizes are refused.
	MaxL1Entries = 1 << 20
	// MaxPending bounds the queue of referenced ranges not yet reached
	// (32 bytes each, and 16 more for a table): 16 MiB, enough for the
	// data clusters of a 32 GiB image with 64 KiB clusters whose tables
	// all come first (qemu-img's preallocation=metadata).
	MaxPending = 1 << 19
	// DefaultReorderLimit is Config.ReorderLimit's default.
	DefaultReorderLimit = 16 << 20
	// maxWrite is how much contiguous guest data is gathered into one
	// write.
	maxWrite = 4 << 20
	// maxCluster is the largest cluster (cluster_bits 21).
	maxCluster = 2 << 20
	// itemSize and extentSize are the bytes of a queued item and of a
	// table's extent.
	itemSize   = 32
	extentSize = 16

	// MemoryBound is the most heap Convert holds at once with the default
	// ReorderLimit, whatever the image: the sum of its bounds. The two
	// read buffers (the L1 table; two clusters, a compressed cluster's
	// bytes); the queue, twice while it grows; the tables (at most one
	// per queued item, grown once per L1 table); the bytes kept for
	// tables placed after their data; an inflated cluster; the write
	// and zero buffers; the zstd decoder's window and block; and 1 MiB
	// for the header, the kept map and the deflate state. It is 83 MiB;
	// hostile images made to reach every bound at once hold 64 MiB
	// (memory_test.go measures them).
	MemoryBound = MaxL1Entries*8 + 2*maxCluster +
		2*MaxPending*itemSize + MaxPending*extentSize +
		DefaultReorderLimit +
		maxCluster + 2*maxWrite +
		2*maxCluster +
		1<<20
)

// Config tunes Convert.
type Config struct {
	// MaxSize refuses images whose virtual size exceeds it (the disk's
	// size); 0 means no limit.
	MaxSize int64
	// ReorderLimit bounds the bytes kept for tables that come after the
	// data they map; 0 means DefaultReorderLimit.
	ReorderLimit int64
	// Zero writes n zero bytes at off. Nil writes zeros through the
	// writer; SkipZeros skips them instead (a fresh file, a device known
	// to read zeros).
	Zero      func(off, n int64) error
	SkipZeros bool
	// Header, when not nil, is called with the parsed header before any
	// data is written (the caller may refuse it by returning an error).
	Header func(Header) error
}

// Header is what Convert read from the image's header.
type Header struct {
	Version       uint32
	ClusterSize   int64
	VirtualSize   int64
	Compression   string // "zlib" or "zstd"
	Snapshots     uint32
	L1Entries     uint32
	IncompatFlags uint64
}

// Result reports a conversion.
type Result struct {
	Header Header
	// Read is how many bytes of the image were read (the whole file).
	Read int64
	// DataBytes and ZeroBytes are what went to the writer as data and
	// as zeros (or were skipped as zeros).
	DataBytes, ZeroBytes int64
	// Kept is the most bytes kept at once for tables placed after the
	// data they map (0 for an image written in order).
	Kept int64
}

// Header extension types (qcow2.txt, "Header extensions").
const (
	extEnd          = 0x00000000
	extBackingFmt   = 0xe2792aca
	extFeatureNames = 0x6803f857
	extBitmaps      = 0x23852875
	extEncryption   = 0x0537be77
	extDataFile     = 0x44415441
)

// Incompatible feature bits (qcow2.txt, "incompatible_features").
const (
	incDirty       = 1 << 0
	incCorrupt     = 1 << 1
	incDataFile    = 1 << 2
	incCompression = 1 << 3
	incExtendedL2  = 1 << 4
	incKnown       = incDirty | incCorrupt | incDataFile | incCompression | incExtendedL2
)

// Entry bits (qcow2.txt, "Cluster mapping").
const (
	offsetMask     = 0x00fffffffffffe00 // bits 9-55
	l2Compressed   = 1 << 62
	l2ZeroFlag     = 1 << 0
	l1ReservedMask = 0x7f000000000001ff
)

type kind uint8

const (
	kindL1 kind = iota
	kindL2
	kindRefcountTable
	kindIgnore // a refcount block: known metadata, never data
	kindData
	kindCompressed
)

func (k kind) String() string {
	return [...]string{"L1 table", "L2 table", "refcount table", "refcount block", "data cluster", "compressed cluster"}[k]
}

// item is a byte range of the file the converter will consume (32
// bytes: the queue holds up to MaxPending of them).
type item struct {
	start int64
	guest int64 // data: the guest offset; L2: the guest offset it maps
	n     int64
	kind  kind
}

// extent is a table's range of the file.
type extent struct{ start, n int64 }

// queue is a min-heap of items by file offset (tables before data at one
// offset). It is typed rather than container/heap's, whose interface
// boxes every pushed item: half a million pushes would leave as many
// garbage allocations behind.
type queue []item

func (q queue) less(i, j int) bool {
	if q[i].start != q[j].start {
		return q[i].start < q[j].start
	}
	return q[i].kind < q[j].kind
}

func (q *queue) push(it item) {
	*q = append(*q, it)
	h := *q
	for i := len(h) - 1; i > 0; {
		p := (i - 1) / 2
		if !h.less(i, p) {
			break
		}
		h[i], h[p] = h[p], h[i]
		i = p
	}
}

func (q *queue) pop() item {
	h := *q
	top := h[0]
	n := len(h) - 1
	h[0] = h[n]
	h = h[:n]
	for i := 0; ; {
		l := 2*i + 1
		if l >= n {
			break
		}
		m := l
		if r := l + 1; r < n && h.less(r, l) {
			m = r
		}
		if !h.less(m, i) {
			break
		}
		h[i], h[m] = h[m], h[i]
		i = m
	}
	*q = h
	return top
}

// converter is one Convert call's state.
type converter struct {
	r   io.Reader
	w   io.WriterAt
	cfg Config
	h   Header
	res Result

	clusterBits uint32
	pos         int64 // bytes of the file read so far
	q           queue
	// tables are the sorted, disjoint ranges of metadata data may not
	// overlap (header, refcount table, L1, L2 tables).
	tables []extent
	// unreadTables counts table items still in the queue; while it is
	// positive, or the L1 is unread, passed bytes may be needed later.
	unreadTables int
	// kept holds passed bytes for tables that come late, keyed by the
	// file offset of the cluster.
	kept     map[int64][]byte
	keptSize int64
	// last is the previous item's bytes: compressed clusters' sector
	// counts overlap the next cluster's start.
	last      []byte
	lastStart int64
	bufs      [2][]byte

	// pending gathers contiguous guest writes.
	wbuf    []byte
	woff    int64
	zoff, z int64 // a pending zero range

	zr    *zstd.Decoder
	fl    io.ReadCloser
	out   []byte // a cluster of inflated data
	skip  []byte
	zeros []byte
}

// Convert reads a qcow2 image from r to its end and writes the raw disk
// it describes to w. The caller hashes r (a TeeReader) for the image's
// checksum: Convert reads every byte of the file, in order, once.
func Convert(r io.Reader, w io.WriterAt, cfg Config) (Result, error) {
	if cfg.ReorderLimit == 0 {
		cfg.ReorderLimit = DefaultReorderLimit
	}
	c := &converter{r: r, w: w, cfg: cfg, kept: map[int64][]byte{}}
	defer func() {
		if c.zr != nil {
			c.zr.Close()
		}
	}()
	err := c.run()
	c.res.Read = c.pos
	c.res.Header = c.h
	return c.res, err
}

func corrupt(format string, a ...any) error {
	return fmt.Errorf("%w: %s", ErrCorrupt, fmt.Sprintf(format, a...))
}

func unsupported(format string, a ...any) error {
	return fmt.Errorf("%w: %s", ErrUnsupported, fmt.Sprintf(format, a...))
}

func (c *converter) run() error {
	if err := c.readHeader(); err != nil {
		return err
	}
	for len(c.q) > 0 {
		it := c.popItem()
		b, err := c.bytesOf(it)
		if err != nil {
			return fmt.Errorf("%s at offset %d: %w", it.kind, it.start, err)
		}
		if err := c.consume(it, b); err != nil {
			return err
		}
		// Counted down once parsed: bytes passed on the way to a table
		// are kept, since the table may point back at them.
		if it.kind <= kindRefcountTable {
			c.unreadTables--
		}
	}
	if err := c.flush(); err != nil {
		return err
	}
	if err := c.flushZero(); err != nil {
		return err
	}
	// The rest of the file (refcount blocks, snapshots, leaked clusters)
	// is read for the caller's checksum.
	n, err := io.Copy(io.Discard, c.r)
	c.pos += n
	if err != nil {
		return fmt.Errorf("read qcow2 image at offset %d: %w", c.pos, err)
	}
	return nil
}

func (c *converter) readFull(b []byte) error {
	n, err := io.ReadFull(c.r, b)
	c.pos += int64(n)
	if errors.Is(err, io.EOF) || errors.Is(err, io.ErrUnexpectedEOF) {
		if err == io.EOF || err == io.ErrUnexpectedEOF { //nolint:errorlint // ReadFull's own: the file ended
			return corrupt("the file ends at byte %d, before the end of what its tables reference", c.pos)
		}
	}
	if err != nil {
		return fmt.Errorf("read qcow2 image at offset %d: %w", c.pos, err)
	}
	return nil
}

func (c *converter) readHeader() error {
	// The header and its extensions lie in the first cluster; read the
	// fixed part first, then the rest of the first cluster.
	fixed := make([]byte, 72)
	if err := c.readFull(fixed); err != nil {
		return err
	}
	be := binary.BigEndian
	if !bytes.Equal(fixed[:4], Magic) {
		return corrupt("no qcow2 magic")
	}
	h := &c.h
	h.Version = be.Uint32(fixed[4:])
	if h.Version != 2 && h.Version != 3 {
		return unsupported("version %d (versions 2 and 3 are supported)", h.Version)
	}
	if be.Uint64(fixed[8:]) != 0 {
		return unsupported("the image has a backing file: only self-contained images can be written to a disk (qemu-img convert -O qcow2 flattens it)")
	}
	c.clusterBits = be.Uint32(fixed[20:])
	if c.clusterBits < 9 || c.clusterBits > 21 {
		return corrupt("cluster_bits %d outside 9..21", c.clusterBits)
	}
	h.ClusterSize = 1 << c.clusterBits
	vsize := be.Uint64(fixed[24:])
	if vsize > 1<<62 {
		return corrupt("virtual size %d", vsize)
	}
	h.VirtualSize = int64(vsize)
	if c.cfg.MaxSize > 0 && h.VirtualSize > c.cfg.MaxSize {
		return fmt.Errorf("%w: virtual size %d bytes, disk %d bytes", ErrTooLarge, h.VirtualSize, c.cfg.MaxSize)
	}
	if m := be.Uint32(fixed[32:]); m != 0 {
		return unsupported("the image is encrypted (crypt_method %d)", m)
	}
	h.L1Entries = be.Uint32(fixed[36:])
	l1Off := int64(be.Uint64(fixed[40:]))
	rtOff := int64(be.Uint64(fixed[48:]))
	rtClusters := int64(be.Uint32(fixed[56:]))
	h.Snapshots = be.Uint32(fixed[60:])
	h.Compression = "zlib"

	first := make([]byte, h.ClusterSize)
	copy(first, fixed)
	if err := c.readFull(first[72:]); err != nil {
		return err
	}
	hdrLen := uint32(72)
	if h.Version == 3 {
		if len(first) < 104 {
			return corrupt("cluster too small for a version 3 header")
		}
		h.IncompatFlags = be.Uint64(first[72:])
		hdrLen = be.Uint32(first[100:])
		if hdrLen < 104 || int64(hdrLen) > h.ClusterSize {
			return corrupt("header_length %d", hdrLen)
		}
		if order := be.Uint32(first[96:]); order > 6 {
			return corrupt("refcount_order %d", order)
		}
		f := h.IncompatFlags
		switch {
		case f&incCorrupt != 0:
			return unsupported("the image is marked corrupt (incompatible feature bit 1): repair it with qemu-img check -r all")
		case f&incDataFile != 0:
			return unsupported("the image keeps its data in an external data file")
		case f&incExtendedL2 != 0:
			return unsupported("extended L2 entries (subclusters) are not supported: qemu-img convert -O qcow2 -o extended_l2=off rewrites the image without them")
		case f&^incKnown != 0:
			return unsupported("unknown incompatible features %#x", f&^incKnown)
		}
		if f&incCompression != 0 {
			if hdrLen < 105 {
				return corrupt("compression type bit set, header_length %d", hdrLen)
			}
			switch t := first[104]; t {
			case 0:
			case 1:
				h.Compression = "zstd"
			default:
				return unsupported("compression type %d", t)
			}
		}
	}
	if err := c.readExtensions(first, int64(hdrLen+7)&^7); err != nil {
		return err
	}
	if c.cfg.Header != nil {
		if err := c.cfg.Header(*h); err != nil {
			return err
		}
	}

	// The L1 table covers the virtual size.
	perL2 := h.ClusterSize * (h.ClusterSize / 8)
	need := (h.VirtualSize + perL2 - 1) / perL2
	if int64(h.L1Entries) < need {
		return corrupt("L1 table has %d entries, the virtual size needs %d", h.L1Entries, need)
	}
	if h.L1Entries > MaxL1Entries {
		return unsupported("L1 table of %d entries (at most %d are held in memory; use a larger cluster size)", h.L1Entries, MaxL1Entries)
	}
	c.tables = append(c.tables, extent{start: 0, n: h.ClusterSize})
	if h.L1Entries > 0 {
		if err := c.table(l1Off, int64(h.L1Entries)*8, kindL1, 0); err != nil {
			return fmt.Errorf("L1 table: %w", err)
		}
	}
	// Refcounts are ignored; the table is read only to tell refcount
	// blocks from data, and skipped when it is larger than an L1 table
	// may be.
	if rtClusters > 0 && rtClusters*h.ClusterSize <= MaxL1Entries*8 {
		if err := c.table(rtOff, rtClusters*h.ClusterSize, kindRefcountTable, 0); err != nil {
			return fmt.Errorf("refcount table: %w", err)
		}
	}
	c.sortTables()
	return c.checkTables()
}

func (c *converter) readExtensions(first []byte, off int64) error {
	be := binary.BigEndian
	for {
		if off+8 > int64(len(first)) {
			return corrupt("header extensions run past the first cluster")
		}
		typ, n := be.Uint32(first[off:]), int64(be.Uint32(first[off+4:]))
		off += 8
		if typ == extEnd {
			return nil
		}
		if off+n > int64(len(first)) {
			return corrupt("header extension %#x of %d bytes runs past the first cluster", typ, n)
		}
		switch typ {
		case extDataFile:
			return unsupported("the image names an external data file")
		case extEncryption:
			return unsupported("the image has a full disk encryption header")
		case extBackingFmt, extFeatureNames, extBitmaps:
		}
		off += (n + 7) &^ 7
	}
}

// table queues a table of n bytes at off, checking its alignment and
// bounds.
func (c *converter) table(off, n int64, k kind, guest int64) error {
	if off <= 0 || off&(c.h.ClusterSize-1) != 0 || off > offsetMask {
		return corrupt("table at offset %d is not a cluster-aligned offset past the header", off)
	}
	if err := c.push(item{start: off, n: n, kind: k, guest: guest}); err != nil {
		return err
	}
	c.tables = append(c.tables, extent{start: off, n: n})
	return nil
}

func (c *converter) push(it item) error {
	if len(c.q) >= MaxPending {
		return fmt.Errorf("%w: more than %d clusters referenced ahead of the stream", ErrReorderLimit, MaxPending)
	}
	if it.kind <= kindRefcountTable {
		c.unreadTables++
	}
	c.q.push(it)
	return nil
}

func (c *converter) popItem() item {
	return c.q.pop()
}

func (c *converter) sortTables() {
	sort.Slice(c.tables, func(i, j int) bool { return c.tables[i].start < c.tables[j].start })
}

// checkTables refuses tables that overlap each other (a loop: an L1 entry
// pointing at the header, at the L1 itself, or two at one L2 table).
func (c *converter) checkTables() error {
	for i := 1; i < len(c.tables); i++ {
		a, b := c.tables[i-1], c.tables[i]
		if a.start+a.n > b.start {
			return corrupt("tables overlap at offset %d", b.start)
		}
	}
	return nil
}

// inTable reports whether [off, off+n) overlaps a table.
func (c *converter) inTable(off, n int64) bool {
	i := sort.Search(len(c.tables), func(i int) bool { return c.tables[i].start+c.tables[i].n > off })
	return i < len(c.tables) && c.tables[i].start < off+n
}

// bytesOf returns the file bytes of it, reading the stream up to its end
// and keeping, while a table may still point back, what it passes.
func (c *converter) bytesOf(it item) ([]byte, error) {
	end := it.start + it.n
	b := c.buffer(it.n)
	if it.start < c.pos {
		// Behind the stream: the previous item's bytes (overlapping
		// compressed clusters) or kept bytes, and the rest read on.
		have := min(c.pos, end) - it.start
		if err := c.past(b[:have], it.start); err != nil {
			return nil, err
		}
		if end > c.pos {
			if err := c.readFull(b[have:]); err != nil {
				return nil, err
			}
		}
		c.last, c.lastStart = b, it.start
		return b, nil
	}
	if err := c.skipTo(it.start); err != nil {
		return nil, err
	}
	if err := c.readFull(b); err != nil {
		return nil, err
	}
	c.last, c.lastStart = b, it.start
	return b, nil
}

// buffer returns n bytes of the one of two buffers that is not c.last, so
// that items are read without an allocation each.
func (c *converter) buffer(n int64) []byte {
	i := 0
	if len(c.last) > 0 && len(c.bufs[0]) > 0 && &c.last[0] == &c.bufs[0][0] {
		i = 1
	}
	if int64(cap(c.bufs[i])) < n {
		c.bufs[i] = make([]byte, n)
	}
	c.bufs[i] = c.bufs[i][:cap(c.bufs[i])]
	return c.bufs[i][:n]
}

// past fills b with the file's bytes at off, which the stream has passed.
func (c *converter) past(b []byte, off int64) error {
	if off >= c.lastStart && off+int64(len(b)) <= c.lastStart+int64(len(c.last)) {
		copy(b, c.last[off-c.lastStart:])
		return nil
	}
	cs := c.h.ClusterSize
	for len(b) > 0 {
		cl := off &^ (cs - 1)
		k, ok := c.kept[cl]
		if !ok {
			return fmt.Errorf("%w: a table read later maps the bytes at offset %d, which were not kept; rewrite the image in order with qemu-img convert -O qcow2", ErrReorderLimit, off)
		}
		n := copy(b, k[off-cl:])
		b, off = b[n:], off+int64(n)
	}
	return nil
}

// skipTo reads the stream up to off, keeping the bytes while a table that
// could point back at them is unread.
func (c *converter) skipTo(off int64) error {
	if c.unreadTables == 0 && len(c.kept) > 0 {
		c.kept, c.keptSize = map[int64][]byte{}, 0
	}
	cs := c.h.ClusterSize
	for c.pos < off {
		if c.unreadTables == 0 {
			if c.skip == nil {
				c.skip = make([]byte, 64<<10)
			}
			n := min(off-c.pos, int64(len(c.skip)))
			if err := c.readFull(c.skip[:n]); err != nil {
				return err
			}
			continue
		}
		cl := c.pos &^ (cs - 1)
		k := c.kept[cl]
		if k == nil {
			if c.keptSize+cs > c.cfg.ReorderLimit {
				return fmt.Errorf("%w: more than %d bytes before offset %d would have to be kept for tables further on; rewrite the image in order with qemu-img convert -O qcow2", ErrReorderLimit, c.cfg.ReorderLimit, off)
			}
			k = make([]byte, cs)
			c.kept[cl] = k
			c.keptSize += cs
			c.res.Kept = max(c.res.Kept, c.keptSize)
			// The previous item's bytes in this cluster: a compressed
			// cluster mapped by a later table may start inside the
			// last sector of one already read.
			if lo, hi := max(cl, c.lastStart), min(cl+cs, c.lastStart+int64(len(c.last))); lo < hi {
				copy(k[lo-cl:hi-cl], c.last[lo-c.lastStart:])
			}
		}
		n := min(off, cl+cs) - c.pos
		if err := c.readFull(k[c.pos-cl : c.pos-cl+n]); err != nil {
			return err
		}
	}
	return nil
}

func (c *converter) consume(it item, b []byte) error {
	switch it.kind {
	case kindL1:
		return c.l1(b)
	case kindL2:
		return c.l2(b, it.guest)
	case kindRefcountTable:
		return c.refcountTable(b)
	case kindIgnore:
		return nil
	case kindData:
		return c.write(b[:min(it.n, c.h.VirtualSize-it.guest)], it.guest)
	case kindCompressed:
		out, err := c.inflate(b, it.start)
		if err != nil {
			return err
		}
		return c.write(out[:min(int64(len(out)), c.h.VirtualSize-it.guest)], it.guest)
	}
	return nil
}

// reserve grows the queue (and the tables, for an L1 table) once for the
// n entries a table is about to push, at most to MaxPending: growing by
// appends would copy the queue many times over on its way to MaxPending,
// each copy garbage the size of the queue.
func (c *converter) reserve(n int, tables bool) {
	n = min(n, MaxPending-len(c.q))
	if n <= 0 {
		return
	}
	c.q = slices.Grow(c.q, n)
	if tables {
		c.tables = slices.Grow(c.tables, n)
	}
}

// references counts the entries of a table that point into the file,
// up to the virtual size.
func (c *converter) references(b []byte, guest0, perEntry int64, mask uint64) int {
	be := binary.BigEndian
	n := 0
	for i := int64(0); i*8 < int64(len(b)) && guest0+i*perEntry < c.h.VirtualSize; i++ {
		if be.Uint64(b[i*8:])&mask != 0 {
			n++
		}
	}
	return n
}

func (c *converter) l1(b []byte) error {
	be := binary.BigEndian
	perL2 := c.h.ClusterSize * (c.h.ClusterSize / 8)
	c.reserve(c.references(b, 0, perL2, offsetMask), true)
	for i := int64(0); i*8 < int64(len(b)); i++ {
		guest := i * perL2
		if guest >= c.h.VirtualSize {
			break
		}
		e := be.Uint64(b[i*8:])
		if e&l1ReservedMask != 0 {
			return corrupt("L1 entry %d has reserved bits set (%#x)", i, e)
		}
		off := int64(e & offsetMask)
		if off == 0 {
			if err := c.zero(guest, min(perL2, c.h.VirtualSize-guest)); err != nil {
				return err
			}
			continue
		}
		if err := c.table(off, c.h.ClusterSize, kindL2, guest); err != nil {
			return fmt.Errorf("L1 entry %d: %w", i, err)
		}
	}
	c.sortTables()
	return c.checkTables()
}

func (c *converter) l2(b []byte, guest0 int64) error {
	be := binary.BigEndian
	cs := c.h.ClusterSize
	// Compressed descriptors: x = 62 - (cluster_bits - 8) offset bits,
	// then the count of additional 512-byte sectors.
	x := 62 - (c.clusterBits - 8)
	c.reserve(c.references(b, guest0, cs, offsetMask|l2Compressed), false)
	for i := int64(0); i*8 < int64(len(b)); i++ {
		guest := guest0 + i*cs
		if guest >= c.h.VirtualSize {
			break
		}
		e := be.Uint64(b[i*8:])
		n := min(cs, c.h.VirtualSize-guest)
		if e&l2Compressed != 0 {
			off := int64(e & (1<<x - 1))
			sectors := int64(e>>x) & (1<<(62-x) - 1)
			size := (sectors+1)*512 - off&511
			if size > 2*cs {
				return corrupt("compressed cluster for guest offset %d claims %d bytes, more than two clusters", guest, size)
			}
			if off < cs || off > offsetMask || c.inTable(off, size) {
				return corrupt("compressed cluster for guest offset %d at file offset %d overlaps the header or a table", guest, off)
			}
			if err := c.push(item{start: off, n: size, kind: kindCompressed, guest: guest}); err != nil {
				return err
			}
			continue
		}
		off := int64(e & offsetMask)
		if e&^(offsetMask|l2ZeroFlag|1<<63) != 0 {
			return corrupt("L2 entry for guest offset %d has reserved bits set (%#x)", guest, e)
		}
		if e&l2ZeroFlag != 0 && c.h.Version < 3 {
			return corrupt("L2 entry for guest offset %d has the zero flag in a version 2 image", guest)
		}
		if off == 0 || e&l2ZeroFlag != 0 {
			if err := c.zero(guest, n); err != nil {
				return err
			}
			continue
		}
		if off&(cs-1) != 0 || c.inTable(off, cs) {
			return corrupt("data cluster for guest offset %d at file offset %d is unaligned or overlaps the header or a table", guest, off)
		}
		if err := c.push(item{start: off, n: cs, kind: kindData, guest: guest}); err != nil {
			return err
		}
	}
	return nil
}

// refcountTable marks the refcount blocks as metadata, so that they are
// never kept for tables further on.
func (c *converter) refcountTable(b []byte) error {
	be := binary.BigEndian
	for i := 0; i+8 <= len(b); i += 8 {
		off := int64(be.Uint64(b[i:]) & offsetMask)
		if off == 0 || off&(c.h.ClusterSize-1) != 0 {
			continue // refcounts are ignored: a bad entry harms nothing
		}
		if err := c.push(item{start: off, n: c.h.ClusterSize, kind: kindIgnore}); err != nil {
			return err
		}
	}
	return nil
}

// inflate decompresses one compressed cluster; it must inflate to exactly
// one cluster (the compressed size field counts whole sectors, so trailing
// bytes after the compressed stream are expected).
func (c *converter) inflate(b []byte, off int64) ([]byte, error) {
	cs := c.h.ClusterSize
	if c.out == nil {
		c.out = make([]byte, cs+1)
	}
	var r io.Reader
	switch c.h.Compression {
	case "zstd":
		if c.zr == nil {
			zr, err := zstd.NewReader(nil, zstd.WithDecoderConcurrency(1), zstd.WithDecoderLowmem(true), zstd.WithDecoderMaxMemory(uint64(2*cs)), zstd.WithDecoderMaxWindow(max(uint64(cs), zstd.MinWindowSize)))
			if err != nil {
				return nil, err
			}
			c.zr = zr
		}
		// The sector count rounds up into the next cluster's frame:
		// read one cluster, and tell inflation past it by the frame's
		// declared content size.
		var fh zstd.Header
		if err := fh.Decode(b); err != nil {
			return nil, corrupt("zstd cluster at offset %d: %v", off, err)
		}
		if fh.HasFCS && fh.FrameContentSize > uint64(cs) {
			return nil, corrupt("compressed cluster at offset %d inflates past the cluster size %d", off, cs)
		}
		if err := c.zr.Reset(bytes.NewReader(b)); err != nil {
			return nil, corrupt("zstd cluster at offset %d: %v", off, err)
		}
		r = c.zr
	default:
		// QEMU writes raw deflate (no zlib header), window bits 12.
		if c.fl == nil {
			c.fl = flate.NewReader(bytes.NewReader(b))
		} else if err := c.fl.(flate.Resetter).Reset(bytes.NewReader(b), nil); err != nil {
			return nil, err
		}
		r = c.fl
	}
	out := c.out
	if c.h.Compression == "zstd" {
		out = c.out[:cs]
	}
	n, err := io.ReadFull(r, out)
	switch {
	case n > int(cs):
		return nil, corrupt("compressed cluster at offset %d inflates past the cluster size %d", off, cs)
	case n < int(cs):
		return nil, corrupt("compressed cluster at offset %d inflates to %d bytes, not a cluster of %d (%v)", off, n, cs, err)
	}
	return c.out[:cs], nil
}

// write gathers contiguous guest data into writes of up to maxWrite.
func (c *converter) write(b []byte, off int64) error {
	c.res.DataBytes += int64(len(b))
	if len(c.wbuf) > 0 && (c.woff+int64(len(c.wbuf)) != off || len(c.wbuf)+len(b) > maxWrite) {
		if err := c.flush(); err != nil {
			return err
		}
	}
	if c.wbuf == nil {
		c.wbuf = make([]byte, 0, maxWrite)
	}
	if len(c.wbuf) == 0 {
		c.woff = off
	}
	c.wbuf = append(c.wbuf, b...)
	return nil
}

func (c *converter) flush() error {
	if len(c.wbuf) == 0 {
		return nil
	}
	if _, err := c.w.WriteAt(c.wbuf, c.woff); err != nil {
		return fmt.Errorf("write guest offset %d: %w", c.woff, err)
	}
	c.wbuf = c.wbuf[:0]
	return nil
}

// zero records n zero bytes at off, merged with an adjacent pending range.
func (c *converter) zero(off, n int64) error {
	c.res.ZeroBytes += n
	if c.z > 0 && c.zoff+c.z == off {
		c.z += n
		return nil
	}
	if err := c.flushZero(); err != nil {
		return err
	}
	c.zoff, c.z = off, n
	return nil
}

func (c *converter) flushZero() error {
	off, n := c.zoff, c.z
	c.z = 0
	if n == 0 || c.cfg.SkipZeros {
		return nil
	}
	if c.cfg.Zero != nil {
		if err := c.cfg.Zero(off, n); err != nil {
			return fmt.Errorf("zero guest offsets %d-%d: %w", off, off+n, err)
		}
		return nil
	}
	if c.zeros == nil {
		c.zeros = make([]byte, maxWrite)
	}
	zeros := c.zeros
	for n > 0 {
		k := min(n, int64(len(zeros)))
		if _, err := c.w.WriteAt(zeros[:k], off); err != nil {
			return fmt.Errorf("zero guest offset %d: %w", off, err)
		}
		off, n = off+k, n-k
	}
	return nil
}
