package testsize

import "testing"

// TestSampleLevels: Sample gives the full size without -short or -race,
// the small one under them, and the emulated one under an emulator
// (which runs with -short) only.
func TestSampleLevels(t *testing.T) {
	for _, emu := range []string{"", "qemu-aarch64-static"} {
		t.Setenv("GRUDGE_TEST_EMULATOR", emu)
		if got := Emulated(); got != (emu != "") {
			t.Fatalf("GRUDGE_TEST_EMULATOR=%q: Emulated() = %v", emu, got)
		}
		want := 40
		switch {
		case Small() && emu != "":
			want = 3
		case Small():
			want = 10
		}
		if got := Sample(40, 10, 3); got != want {
			t.Errorf("GRUDGE_TEST_EMULATOR=%q, Small %v: Sample(40, 10, 3) = %d, want %d", emu, Small(), got, want)
		}
	}
}
