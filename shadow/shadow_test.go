package shadow

import (
	"os"
	"path/filepath"
	"strings"
	"testing"
)

// The SHA-512 test vectors of the specification ("Unix crypt using SHA-256
// and SHA-512", Ulrich Drepper).
func TestCryptMatchesTheSpecificationsVectors(t *testing.T) {
	for _, tc := range []struct{ setting, password, want string }{
		{"$6$saltstring", "Hello world!",
			"$6$saltstring$svn8UoSVapNtMuq1ukKS4tPQd8iKwSMHWjl/O817G3uBnIFNjnQJuesI68u4OTLiBFdcbYEdFCoEOfaS35inz1"},
		{"$6$rounds=10000$saltstringsaltstring", "Hello world!",
			"$6$rounds=10000$saltstringsaltst$OW1/O6BYHV6BcXZu8QVeXbDWra3Oeqh0sbHbbMCVNSnCM/UrjmM0Dp8vOuZeHBy/YTBmSK6H9qs/y3RnOaw5v."},
		{"$6$rounds=5000$toolongsaltstring", "This is just a test",
			"$6$rounds=5000$toolongsaltstrin$lQ8jolhgVRVhY4b5pZKaysCLi0QBxGoNeKQzQ3glMhwllF7oGDZxUhx1yxdYcz/e1JSbq3y6JMxxl8audkUEm0"},
		{"$6$rounds=1400$anotherlongsaltstring", "a very much longer text to encrypt.  This one even stretches over morethan one line.",
			"$6$rounds=1400$anotherlongsalts$POfYwTEok97VWcjxIiSOjiykti.o/pQs.wPvMxQ6Fm7I6IoYN3CmLs66x9t0oSwbtEW7o7UmJEiDwGqd8p4ur1"},
		{"$6$rounds=77777$short", "we have a short salt string but not a short password",
			"$6$rounds=77777$short$WuQyW2YR.hBNpjjRhpYD/ifIw05xdfeEyQoMxIXbkvr0gge1a1x3yRULJ5CCaUeOxFmtlcGZelFl5CxtgfiAc0"},
		{"$6$rounds=123456$asaltof16chars..", "a short string",
			"$6$rounds=123456$asaltof16chars..$BtCwjqMJGx5hrJhZywWvt0RLE8uZ4oPwcelCjmw2kSYu.Ec6ycULevoBK25fs2xXgMNrCzIMVcgEJAstJeonj1"},
		{"$6$rounds=10$roundstoolow", "the minimum number is still observed",
			"$6$rounds=1000$roundstoolow$kUMsbe306n21p9R.FRkW3IGn.S9NPN0x50YhH1xhLsPuWGsUSklZt58jaTfF4ZEQpyUNGc0dqbpBYYBaHHrsX."},
	} {
		got, err := Crypt(tc.password, tc.setting)
		if err != nil || got != tc.want {
			t.Errorf("Crypt(%q, %q) = %q, %v; want %q", tc.password, tc.setting, got, err, tc.want)
		}
	}
}

func TestHashVerifies(t *testing.T) {
	h, err := Hash("s3cr3t pass")
	if err != nil {
		t.Fatal(err)
	}
	if !IsHash(h) || len(h) != len("$6$")+16+1+86 {
		t.Fatalf("Hash = %q: not a SHA-512 crypt hash with a 16-character salt", h)
	}
	if !Verify("s3cr3t pass", h) || Verify("s3cr3t pas", h) {
		t.Fatalf("Verify of %q does not tell the password from another", h)
	}
	h2, _ := Hash("s3cr3t pass")
	if h2 == h {
		t.Fatal("two hashes of one password share a salt")
	}
}

func TestSetUserWritesPasswdGroupAndShadow(t *testing.T) {
	root := t.TempDir()
	if err := os.MkdirAll(filepath.Join(root, "etc"), 0o755); err != nil {
		t.Fatal(err)
	}
	if err := os.WriteFile(filepath.Join(root, "etc", "passwd"), []byte("root:x:0:0:root:/root:/bin/sh\nrescue:x:1:1:old:/:/bin/false\n"), 0o644); err != nil {
		t.Fatal(err)
	}
	h, _ := Hash("pw")
	if err := SetUser(root, User{Name: "rescue", UID: 1000, GID: 1000, Home: "/", Shell: "/bin/sh"}, h); err != nil {
		t.Fatal(err)
	}
	if l, ok := Entry(root, "passwd", "root"); !ok || l != "root:x:0:0:root:/root:/bin/sh" {
		t.Errorf("root's passwd entry changed: %q", l)
	}
	if l, _ := Entry(root, "passwd", "rescue"); l != "rescue:x:1000:1000:rescue:/:/bin/sh" {
		t.Errorf("rescue's passwd entry: %q", l)
	}
	l, _ := Entry(root, "shadow", "rescue")
	if parts := strings.Split(l, ":"); len(parts) != 9 || !Verify("pw", parts[1]) {
		t.Errorf("rescue's shadow entry %q does not hold the hash of its password", l)
	}
	if fi, err := os.Stat(filepath.Join(root, "etc", "shadow")); err != nil || fi.Mode().Perm() != 0o600 {
		t.Errorf("/etc/shadow mode: %v %v", fi.Mode(), err)
	}
	if err := SetUser(root, User{Name: "rescue"}, "clear text"); err == nil {
		t.Error("SetUser accepted a password that is not a hash")
	}
}
