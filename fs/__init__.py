"""The FUSE filesystem: the vault as a directory of Markdown memories."""
