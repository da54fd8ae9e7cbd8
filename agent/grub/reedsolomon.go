package grub

// GRUB's Reed-Solomon parity for core.img (GRUB's lib/reed_solomon.c, which
// grub-bios-setup calls and the i386-pc decompressor undoes at boot).
//
// The field is GF(2^8) with the polynomial x^8+x^4+x^3+x^2+1 (0x11d) and
// generator 2. The data is cut into chunks of at most rsMaxBlock bytes of
// data plus parity, in proportion; inside a chunk, byte i of every sector
// forms one code word (column i), so that a lost sector costs each word
// one symbol. Each word's parity is the remainder of the data polynomial
// by prod_{j<rr} (X - 2^j), its symbols stored at byte i of the parity's
// sectors.

const (
	gfPolynomial = 0x1d // x^8 reduced: x^4+x^3+x^2+1
	rsMaxBlock   = 200 * SectorSize
)

var gfExp, gfLog = gfTables()

func gfTables() (exp [510]byte, log [256]int) {
	cur := byte(1)
	for i := 0; i < 255; i++ {
		exp[i], exp[i+255] = cur, cur
		log[cur] = i
		if cur&0x80 != 0 {
			cur = cur<<1 ^ gfPolynomial
		} else {
			cur <<= 1
		}
	}
	return exp, log
}

func gfMul(a, b byte) byte {
	if a == 0 || b == 0 {
		return 0
	}
	return gfExp[gfLog[a]+gfLog[b]]
}

// rsGenerator is prod_{j<rr} (X - 2^j), highest coefficient first, built
// the way lib/reed_solomon.c builds it (its coefficients are the same for
// any order of multiplication; the procedure is kept for byte equality).
func rsGenerator(rr int) []byte {
	g := make([]byte, rr+1)
	g[rr] = 1
	for j := 0; j < rr; j++ {
		for i := 0; i < rr; i++ {
			if g[i] != 0 {
				g[i] = g[i+1] ^ gfExp[j+gfLog[g[i]]]
			} else {
				g[i] = g[i+1]
			}
		}
		if g[rr] != 0 {
			g[rr] = gfExp[j+gfLog[g[rr]]]
		}
	}
	return g
}

// rsParity divides data by g (long division, leading symbol first) and
// returns the rr-symbol remainder.
func rsParity(data []byte, g []byte) []byte {
	rr := len(g) - 1
	m := make([]byte, len(data)+rr)
	copy(m, data)
	for j := range data {
		if f := m[j]; f != 0 {
			for i := 0; i <= rr; i++ {
				m[i+j] ^= gfMul(g[i], f)
			}
		}
	}
	return m[len(data):]
}

// encodeChunk writes the parity of data (s bytes) into parity (rs bytes),
// column by column.
func encodeChunk(data []byte, s int, parity []byte, rs int) {
	gens := map[int][]byte{}
	word := make([]byte, 0, rsMaxBlock/SectorSize)
	for i := 0; i < SectorSize; i++ {
		ds := (s + SectorSize - 1 - i) / SectorSize
		rr := (rs + SectorSize - 1 - i) / SectorSize
		if ds == 0 || rr == 0 {
			continue
		}
		word = word[:0]
		for j := 0; j < ds; j++ {
			word = append(word, data[SectorSize*j+i])
		}
		g, ok := gens[rr]
		if !ok {
			g = rsGenerator(rr)
			gens[rr] = g
		}
		for j, p := range rsParity(word, g) {
			parity[SectorSize*j+i] = p
		}
	}
}

// addRedundancy computes the rs parity bytes of the s bytes at buf[0:s]
// into buf[s:s+rs], chunk by chunk, as grub_reed_solomon_add_redundancy.
func addRedundancy(buf []byte, s, rs int) {
	if rs == 0 {
		return
	}
	data, parity := 0, s
	for s > 0 {
		cs, crs := s, rs
		if t := cs + crs; t > rsMaxBlock {
			cs = cs * (rsMaxBlock / SectorSize) / t * SectorSize
			crs = crs * (rsMaxBlock / SectorSize) / t * SectorSize
		}
		if cs == 0 {
			// GRUB would loop here forever; nothing is left to protect
			// in a useful proportion.
			return
		}
		encodeChunk(buf[data:], cs, buf[parity:], crs)
		data += cs
		parity += crs
		s -= cs
		rs -= crs
	}
}
