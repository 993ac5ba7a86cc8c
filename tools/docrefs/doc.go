// Package docrefs owns the check that every reference the repository makes to its own
// documents resolves, so that a reader who follows one finds what it names. It scans the
// repository's .go, .md and .sh files, every Makefile and .ci/run (never .git, build,
// testdata or node_modules directories, or binary files) and reports, with file and line:
//
//   - a relative Markdown link, [text](path) or [text](path#anchor), in a .md file whose
//     path names no file or directory (links with a scheme such as https: or mailto:, and
//     links to an anchor of the same page, are not checked);
//   - a mention of a Markdown file by name that resolves neither from the mentioning
//     file's directory nor from any directory above it up to the repository root (a file
//     in protocol/replica that names the spec by its bare file name finds
//     protocol/SPEC.md); a mention that
//     starts with ./ or ../ resolves from the file's directory only, and one that leaves
//     the repository is always an error;
//   - a section reference, a Markdown file name followed by the section sign and a number
//     such as 3 or 3.2, whose file has no heading whose text starts with that number and
//     a dot (## 3. Storage; ### 3.2 or ### 3.2. for a subsection);
//   - a mention of an issue by number: the issues live outside the repository, so the
//     text must say what the work was instead.
//
// The whole-repository check is TestRepository; the rules' own tests show each one
// failing on a reference that does not resolve.
//
// # The jobs, by file
//
// docrefs.go holds them all: Root, the repository's root (internal/docsection finds the
// docs by it too); Check, every file of it that Scanned selects; Checker, the rules over
// one file's text; and Headings, a Markdown file's headings, which the section rule
// reads.
package docrefs
