// Reads the Python documentation HTML of Debian's python3-doc (a Sphinx build; Debian installs
// it at /usr/share/doc/python3-doc/html, a link to python3.X's copy) into corpus documents, one
// per page.
//
// Pages: every *.html below the root, in path order, except the generated index and search pages
// (genindex*.html, py-modindex.html, search.html) and Sphinx's own directories (_static,
// _sources, _images, _downloads). Text: html_text.h over the page, dropping Sphinx's navigation
// (sidebar, "related" bars, footer, the mobile menu) and the ¶ header links.
//
// Document: doc_id "python-doc:<path>" ("python-doc:library/os.html"); url the page's address
// on docs.python.org for the version installed ("https://docs.python.org/3.11/library/os.html");
// title the page's <title> without the " — Python 3.11.2 documentation" tail; links every
// hyperlink to another page of the documentation (fragments and queries removed, one link per
// target and anchor text).
#pragma once

#include <string>

#include "base/status.h"
#include "toolsets/search/corpus_store.h"

namespace envforge::search {

// Reads the pages below `root`. `version` ("3.11") goes into the urls; empty means "3". Errors:
// NotFound naming `root` when it holds no page; the errno's code for an unreadable page;
// whatever `sink` returns.
Status ReadPythonDocs(const std::string& root, const std::string& version, const DocumentSink& sink);

// The "3.X" of the documentation a path (followed through links) belongs to, from a component
// "python3.X" of its canonical path; empty when there is none.
std::string PythonDocVersion(const std::string& root);

}  // namespace envforge::search
