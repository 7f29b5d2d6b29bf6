# SPDX-License-Identifier: GPL-2.0
# Packages: `make deb` (debian/, built with debhelper in a copy of the
# tree) and `make image` (an OCI image of Debian packages and that .deb;
# deploy/image/build.sh). docs/operations.md, "Installing".

DEB_DIR     := $(BUILD)/deb
# 0~git<commit date>.<commit>: sorts by date, names the commit
DEB_VERSION ?= $(shell git log -1 --format='0~git%cd.%h' \
		 --date=format:%Y%m%d%H%M 2>/dev/null || echo 0~dev)
DEB_ARCH    := $(shell dpkg --print-architecture 2>/dev/null)
DEB         := $(DEB_DIR)/sluice_$(DEB_VERSION)_$(DEB_ARCH).deb
DEB_TOOLS   := dpkg-buildpackage dh lintian

.PHONY: deb image lintian
# The tree as git has it (with uncommitted edits), or without build/
# outside git; built offline: only the Build-Depends must be installed.
deb:
	@for t in $(DEB_TOOLS); do command -v $$t >/dev/null || { \
		echo "deb: no $$t: apt-get install debhelper lintian" >&2; \
		exit 1; }; done
	rm -rf $(DEB_DIR) && mkdir -p $(DEB_DIR)/src
	if git rev-parse --is-inside-work-tree >/dev/null 2>&1; then \
		git ls-files -z --cached --others --exclude-standard | \
		xargs -0 tar -cf - --ignore-failed-read 2>/dev/null; \
	else tar --exclude=./$(BUILD) -cf - .; fi | tar -C $(DEB_DIR)/src -xf -
	sed -i '1s/([^)]*)/($(DEB_VERSION))/' $(DEB_DIR)/src/debian/changelog
	cd $(DEB_DIR)/src && dpkg-buildpackage -b -us -uc \
		-j$$(nproc) >../build.log 2>&1 || { tail -30 ../build.log; exit 1; }
	lintian --tag-display-limit 0 $(DEB) >$(DEB_DIR)/lintian.txt 2>&1; \
		rc=$$?; cat $(DEB_DIR)/lintian.txt; exit $$rc
	@echo "deb: $(DEB)"

# The OCI image: Debian packages and the .deb (deploy/image/build.sh);
# about 2 minutes, most of it mmdebstrap.
IMAGE_DIR := $(BUILD)/image
IMAGE_TAG ?= $(subst ~,-,$(DEB_VERSION))
image: deb
	deploy/image/build.sh $(DEB) $(IMAGE_DIR) $(IMAGE_TAG)
