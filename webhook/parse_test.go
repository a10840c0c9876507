package webhook

import (
	"testing"

	"github.com/google/go-cmp/cmp"
)

// TestParse reads the refs a push names, deletions included: recond must
// notice that its ref went away.
func TestParse(t *testing.T) {
	for _, tc := range []struct {
		name, provider, event, payload string
		want                           event
		wantErr                        bool
	}{
		{"github push", GitHub, "push", `{"ref":"refs/heads/main","after":"1"}`, event{kindPush, []string{"refs/heads/main"}}, false},
		{"github deletion", GitHub, "push", `{"ref":"refs/heads/main","deleted":true,"after":"0000000000000000000000000000000000000000"}`, event{kindPush, []string{"refs/heads/main"}}, false},
		{"github push without ref", GitHub, "push", `{"after":"1"}`, event{}, true},
		{"github ping", GitHub, "ping", `{"zen":"x"}`, event{kind: kindPing}, false},
		{"github other", GitHub, "issues", `{}`, event{kind: kindOther}, false},
		{"github other, not JSON", GitHub, "issues", `{`, event{}, true},
		{"gitea branch deleted", Gitea, "delete", `{"ref":"main","ref_type":"branch"}`, event{kindPush, []string{"refs/heads/main"}}, false},
		{"gitea tag deleted", Gitea, "delete", `{"ref":"v1","ref_type":"tag"}`, event{kindPush, []string{"refs/tags/v1"}}, false},
		{"gitlab system push", GitLab, "System Hook", `{"object_kind":"push","ref":"refs/heads/main"}`, event{kindPush, []string{"refs/heads/main"}}, false},
		{"gitlab system other", GitLab, "System Hook", `{"object_kind":"merge_request"}`, event{kind: kindOther}, false},
		{"bitbucket deletion", Bitbucket, "repo:push", `{"push":{"changes":[{"new":null,"old":{"type":"branch","name":"main"}}]}}`, event{kindPush, []string{"refs/heads/main"}}, false},
		{"bitbucket tag and branch, once each", Bitbucket, "repo:push", `{"push":{"changes":[{"new":{"type":"tag","name":"v1"}},{"new":{"type":"branch","name":"main"}},{"new":{"type":"branch","name":"main"}}]}}`, event{kindPush, []string{"refs/tags/v1", "refs/heads/main"}}, false},
		{"bitbucket not a git ref", Bitbucket, "repo:push", `{"push":{"changes":[{"new":{"type":"named_branch","name":"x"}}]}}`, event{kind: kindPush}, false},
		{"bitbucket server", Bitbucket, "repo:refs_changed", `{"changes":[{"ref":{"id":"refs/heads/main"}}]}`, event{kindPush, []string{"refs/heads/main"}}, false},
	} {
		t.Run(tc.name, func(t *testing.T) {
			got, err := parse(tc.provider, tc.event, []byte(tc.payload))
			if (err != nil) != tc.wantErr {
				t.Fatalf("err = %v, want error %v", err, tc.wantErr)
			}
			if diff := cmp.Diff(tc.want, got, cmp.AllowUnexported(event{})); diff != "" {
				t.Errorf("event (-want +got):\n%s", diff)
			}
		})
	}
}
