package status

import "strings"

// The palette: every colour the page uses. Each foreground has a contrast
// of at least 4.5:1 against the background it is drawn on (contrasts,
// checked by a test), and no state is told by colour alone: outcomes,
// health and phases are also written out.
const (
	colBackground = "#ffffff"
	colPanel      = "#f6f8fa" // table headers, the header block
	colBorder     = "#d1d9e0" // lines only, never behind or as text
	colText       = "#1f2328"
	colMuted      = "#59636e"
	colLink       = "#0550ae"

	// Outcome badges: text on a tint.
	colConvergedText  = "#116329"
	colConvergedTint  = "#dafbe1"
	colAppliedText    = "#0a3069"
	colAppliedTint    = "#ddf4ff"
	colOutOfSyncText  = "#7d4e00"
	colOutOfSyncTint  = "#fff8c5"
	colFailedText     = "#a40e26"
	colFailedTint     = "#ffebe9"
	colPhaseRead      = "#0550ae"
	colPhaseObserve   = "#6639ba"
	colPhaseDiff      = "#953800"
	colPhaseApply     = "#116329"
	colPhaseHealth    = "#0a6a73"
	colPhaseFailed    = "#a40e26"
	colHealthGood     = "#116329"
	colHealthProgress = "#7d4e00"
	colHealthBad      = "#a40e26"
	colHealthUnknown  = "#59636e"
)

// contrast is one pair of colours drawn on each other.
type contrast struct {
	name, fg, bg string
}

// contrasts lists every foreground the CSS draws with the background it is
// drawn on. Phase bars are drawn on the page background.
var contrasts = []contrast{
	{"text", colText, colBackground},
	{"text on panel", colText, colPanel},
	{"muted", colMuted, colBackground},
	{"muted on panel", colMuted, colPanel},
	{"link", colLink, colBackground},
	{"link on panel", colLink, colPanel},
	{"converged", colConvergedText, colConvergedTint},
	{"applied", colAppliedText, colAppliedTint},
	{"out_of_sync", colOutOfSyncText, colOutOfSyncTint},
	{"suspended banner", colText, colOutOfSyncTint},
	{"suspended banner, muted", colMuted, colOutOfSyncTint},
	{"failed", colFailedText, colFailedTint},
	{"phase read", colPhaseRead, colBackground},
	{"phase observe", colPhaseObserve, colBackground},
	{"phase diff", colPhaseDiff, colBackground},
	{"phase apply", colPhaseApply, colBackground},
	{"phase health", colPhaseHealth, colBackground},
	{"phase failed", colPhaseFailed, colBackground},
	{"health good", colHealthGood, colBackground},
	{"health progressing", colHealthProgress, colBackground},
	{"health bad", colHealthBad, colBackground},
	{"health unknown", colHealthUnknown, colBackground},
}

// css is the page's only style sheet, inline: markup, written as it is
// into <style> (it holds no "</").
var css = markup(strings.NewReplacer(
	"BG", colBackground, "PANEL", colPanel, "BORDER", colBorder, "TEXT", colText, "MUTED", colMuted, "LINK", colLink,
	"CONVT", colConvergedText, "CONVB", colConvergedTint, "APPT", colAppliedText, "APPB", colAppliedTint,
	"OOST", colOutOfSyncText, "OOSB", colOutOfSyncTint, "FAILT", colFailedText, "FAILB", colFailedTint,
	"PREAD", colPhaseRead, "POBS", colPhaseObserve, "PDIFF", colPhaseDiff, "PAPPLY", colPhaseApply,
	"PHEALTH", colPhaseHealth, "PFAIL", colPhaseFailed,
	"HGOOD", colHealthGood, "HPROG", colHealthProgress, "HBAD", colHealthBad, "HUNK", colHealthUnknown,
).Replace(`
body{margin:0;font:14px/1.4 system-ui,-apple-system,"Segoe UI",sans-serif;color:TEXT;background:BG}
header,main{padding:0 16px}header{background:PANEL;border-bottom:1px solid BORDER;padding-bottom:8px}
h1{font-size:20px;margin:0;padding:12px 0 6px}h2{font-size:16px;margin:20px 0 8px}h3{font-size:14px;margin:14px 0 4px}
a{color:LINK}code,pre{font:12px/1.4 ui-monospace,monospace}pre{white-space:pre-wrap;word-break:break-word;margin:0}
dl{display:flex;flex-wrap:wrap;gap:4px 24px;margin:0}dl div{display:flex;gap:6px}dt{color:MUTED}dd{margin:0}
table{border-collapse:collapse;width:100%}th,td{text-align:left;padding:3px 6px;border-bottom:1px solid BORDER;vertical-align:top}
thead th{background:PANEL;font-weight:600}.n{text-align:right}.m{color:MUTED}
.g{display:flex;width:240px;height:14px;margin-top:3px;background:BG;outline:1px solid BORDER}.g i{display:block;height:100%;box-shadow:inset -1px 0 BG}
.p-read{background:PREAD}.p-observe{background:POBS}.p-diff{background:PDIFF}.p-apply{background:PAPPLY}.p-health{background:PHEALTH}
.p-fail{background:repeating-linear-gradient(45deg,PFAIL 0 4px,BG 4px 6px)}
.k{display:inline-block;width:10px;height:10px;margin:0 4px 0 10px}
.o{padding:0 6px;border-radius:8px;font-weight:600;white-space:nowrap}
.o-converged{color:CONVT;background:CONVB}.o-applied{color:APPT;background:APPB}.o-out_of_sync{color:OOST;background:OOSB}.o-failed{color:FAILT;background:FAILB}
.h-current,.h-healthy{color:HGOOD}.h-in_progress,.h-progressing{color:HPROG}.h-failed,.h-degraded{color:HBAD}.h-unknown,.h-terminating{color:HUNK}
.sr{position:absolute;width:1px;height:1px;overflow:hidden;clip:rect(0 0 0 0);white-space:nowrap}
nav{margin:8px 0}nav a,nav span{margin-right:12px}
.banner{margin:4px 0 8px;padding:6px 10px;background:OOSB;border-left:4px solid OOST}
`))
