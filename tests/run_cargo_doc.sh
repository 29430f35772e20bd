#!/bin/sh
# Runs `cargo doc --no-deps` on bindings/rust against the build tree and
# reports in TAP. Needs TPT_BUILD_ROOT and TPT_SOURCE_ROOT.
#
# It denies the rustdoc lints this check exists for, by name, rather than
# every warning (`-D warnings`): each rustdoc release adds or drops lints
# (1.85's unportable_markdown is gone from later ones), and the README supports
# every rustc from the crates' rust-version on, Debian 12's rustc-web 1.85 and
# the newest stable among them. Denied:
#   rustdoc::broken_intra_doc_links   [`Name`] that resolves to nothing
#   rustdoc::private_intra_doc_links  a public doc linking to a private item
#   rustdoc::invalid_codeblock_attributes, rustdoc::invalid_rust_codeblocks
#                                     code blocks that are not what they say
#   rustdoc::invalid_html_tags        unclosed or unknown HTML in a doc comment
#   rustdoc::bare_urls                an address that is not a link
#   rustdoc::missing_crate_level_docs a crate without its front page
# Any other warning of the installed rustdoc is listed as a TAP comment.
set -u
export TPTRAIN_LIB_DIR="$TPT_BUILD_ROOT"
export CARGO_TARGET_DIR="$TPT_BUILD_ROOT/cargo-target"
lints="rustdoc::broken_intra_doc_links rustdoc::private_intra_doc_links
       rustdoc::invalid_codeblock_attributes rustdoc::invalid_rust_codeblocks
       rustdoc::invalid_html_tags rustdoc::bare_urls rustdoc::missing_crate_level_docs"
flags=""
for l in $lints; do flags="$flags -D $l"; done
export RUSTDOCFLAGS="${flags# }"
log="$TPT_BUILD_ROOT/cargo-doc.log"
cd "$TPT_SOURCE_ROOT/bindings/rust" || exit 1
cargo doc --offline --no-deps --workspace --color never >"$log" 2>&1
rc=$?
echo "TAP version 13"
echo "1..1"
echo "# $(rustdoc --version 2>/dev/null || echo 'rustdoc: version unknown')"
if [ "$rc" -eq 0 ]; then
  echo "ok 1 - cargo doc --no-deps, denying $(echo $lints | sed 's/rustdoc:://g')"
  if grep -q '^warning' "$log"; then
    echo "# other rustdoc warnings (not denied):"
    sed 's/^/#   /' "$log" | tail -40
  fi
else
  echo "not ok 1 - cargo doc --no-deps exited $rc"
  sed 's/^/#   /' "$log" | tail -60
fi
