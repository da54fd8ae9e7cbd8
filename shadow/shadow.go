// Package shadow hashes passwords as crypt(3)'s SHA-512 method ("$6$",
// Ulrich Drepper's "Unix crypt using SHA-256 and SHA-512" specification)
// and writes a user's entries into a system's /etc/passwd and /etc/shadow.
// The API hashes a rescue_password with it so that the clear password is
// never stored; the agent writes the hash for the rescue user. It is pure
// Go, so the static agent can use it.
package shadow

import (
	"crypto/rand"
	"crypto/sha512"
	"crypto/subtle"
	"errors"
	"fmt"
	"strconv"
	"strings"
)

// Prefix marks a SHA-512 crypt hash.
const Prefix = "$6$"

// The specification's bounds.
const (
	DefaultRounds = 5000
	MinRounds     = 1000
	MaxRounds     = 999999999
	MaxSaltLen    = 16
)

// b64 is crypt(3)'s base-64 alphabet.
const b64 = "./0123456789ABCDEFGHIJKLMNOPQRSTUVWXYZabcdefghijklmnopqrstuvwxyz"

// Hash returns the SHA-512 crypt hash of password with a fresh random
// 16-character salt and the default rounds: "$6$<salt>$<hash>".
func Hash(password string) (string, error) {
	var raw [MaxSaltLen]byte
	if _, err := rand.Read(raw[:]); err != nil {
		return "", fmt.Errorf("salt: %w", err)
	}
	salt := make([]byte, MaxSaltLen)
	for i, b := range raw {
		salt[i] = b64[int(b)%len(b64)]
	}
	return Crypt(password, Prefix+string(salt))
}

// Crypt hashes password with the settings of setting: "$6$[rounds=N$]salt"
// (anything after the salt, such as an earlier hash, is ignored), as
// crypt(3) does.
func Crypt(password, setting string) (string, error) {
	if !strings.HasPrefix(setting, Prefix) {
		return "", errors.New("shadow: not a SHA-512 crypt setting (want $6$)")
	}
	rest := setting[len(Prefix):]
	rounds, custom := DefaultRounds, false
	if r, ok := strings.CutPrefix(rest, "rounds="); ok {
		num, after, found := strings.Cut(r, "$")
		n, err := strconv.ParseUint(num, 10, 64)
		if !found || err != nil {
			return "", errors.New("shadow: bad rounds= in setting")
		}
		rounds, custom, rest = int(min(max(n, MinRounds), MaxRounds)), true, after
	}
	salt, _, _ := strings.Cut(rest, "$")
	if len(salt) > MaxSaltLen {
		salt = salt[:MaxSaltLen]
	}
	sum := digest([]byte(password), []byte(salt), rounds)

	var b strings.Builder
	b.WriteString(Prefix)
	if custom {
		fmt.Fprintf(&b, "rounds=%d$", rounds)
	}
	b.WriteString(salt)
	b.WriteByte('$')
	encode(&b, sum)
	return b.String(), nil
}

// Verify reports whether hash is password's SHA-512 crypt hash.
func Verify(password, hash string) bool {
	got, err := Crypt(password, hash)
	return err == nil && subtle.ConstantTimeCompare([]byte(got), []byte(hash)) == 1
}

// IsHash reports whether s has the shape of a SHA-512 crypt hash.
func IsHash(s string) bool {
	if !strings.HasPrefix(s, Prefix) {
		return false
	}
	i := strings.LastIndexByte(s, '$')
	enc := s[i+1:]
	if len(enc) != 86 || i < len(Prefix) {
		return false
	}
	for _, c := range enc {
		if !strings.ContainsRune(b64, c) {
			return false
		}
	}
	return true
}

// digest is steps 1 to 21 of the specification.
func digest(pw, salt []byte, rounds int) []byte {
	h := sha512.New()
	// B = SHA512(password salt password)
	h.Write(pw)
	h.Write(salt)
	h.Write(pw)
	b := h.Sum(nil)

	// A = SHA512(password salt B-repeated-to-len(password) bits-of-len)
	h.Reset()
	h.Write(pw)
	h.Write(salt)
	n := len(pw)
	for ; n > 64; n -= 64 {
		h.Write(b)
	}
	h.Write(b[:n])
	for n = len(pw); n > 0; n >>= 1 {
		if n&1 != 0 {
			h.Write(b)
		} else {
			h.Write(pw)
		}
	}
	a := h.Sum(nil)

	// P: SHA512(password repeated len(password) times), to len(password).
	h.Reset()
	for range len(pw) {
		h.Write(pw)
	}
	p := repeat(h.Sum(nil), len(pw))

	// S: SHA512(salt repeated 16+A[0] times), to len(salt).
	h.Reset()
	for range 16 + int(a[0]) {
		h.Write(salt)
	}
	s := repeat(h.Sum(nil), len(salt))

	for i := range rounds {
		h.Reset()
		if i&1 != 0 {
			h.Write(p)
		} else {
			h.Write(a)
		}
		if i%3 != 0 {
			h.Write(s)
		}
		if i%7 != 0 {
			h.Write(p)
		}
		if i&1 != 0 {
			h.Write(a)
		} else {
			h.Write(p)
		}
		a = h.Sum(a[:0])
	}
	return a
}

func repeat(d []byte, n int) []byte {
	out := make([]byte, 0, n)
	for len(out) < n {
		out = append(out, d[:min(len(d), n-len(out))]...)
	}
	return out
}

// order is the specification's byte order for SHA-512's encoding: groups
// of three bytes, each written as four characters.
var order = [21][3]int{
	{0, 21, 42}, {22, 43, 1}, {44, 2, 23}, {3, 24, 45}, {25, 46, 4}, {47, 5, 26}, {6, 27, 48},
	{28, 49, 7}, {50, 8, 29}, {9, 30, 51}, {31, 52, 10}, {53, 11, 32}, {12, 33, 54}, {34, 55, 13},
	{56, 14, 35}, {15, 36, 57}, {37, 58, 16}, {59, 17, 38}, {18, 39, 60}, {40, 61, 19}, {62, 20, 41},
}

func encode(b *strings.Builder, d []byte) {
	put := func(w uint32, n int) {
		for range n {
			b.WriteByte(b64[w&0x3f])
			w >>= 6
		}
	}
	for _, g := range order {
		put(uint32(d[g[0]])<<16|uint32(d[g[1]])<<8|uint32(d[g[2]]), 4)
	}
	put(uint32(d[63]), 2)
}
