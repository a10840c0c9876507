// A module that must fail the vulnerability scan: it calls language.Parse of
// golang.org/x/text v0.3.5, reachable GO-2021-0113 (fixed in v0.3.7).
module recond.dev/recond/tools/vulndb/testdata/vulnerable

go 1.26

require golang.org/x/text v0.3.5
