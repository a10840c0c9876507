// Copyright 2019 The Kubernetes Authors.
// SPDX-License-Identifier: Apache-2.0

package git

import (
	"fmt"

	"sigs.k8s.io/kustomize/kyaml/filesys"
)

// Cloner is a function that can clone a git repo.
type Cloner func(repoSpec *RepoSpec) error

// ClonerUsingGitExec would run a local git install to clone a remote
// repo. This build of kustomize never starts a process: it returns an
// error naming the repository instead.
func ClonerUsingGitExec(repoSpec *RepoSpec) error {
	return fmt.Errorf("remote repository %q: recond renders only files inside the repository", repoSpec.CloneSpec())
}

// DoNothingCloner returns a cloner that only sets
// cloneDir field in the repoSpec.  It's assumed that
// the cloneDir is associated with some fake filesystem
// used in a test.
func DoNothingCloner(dir filesys.ConfirmedDir) Cloner {
	return func(rs *RepoSpec) error {
		rs.Dir = dir
		return nil
	}
}
