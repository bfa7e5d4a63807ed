package io.deltaflow.storage;

import org.apache.hadoop.fs.LocalFileSystem;

/**
 * Hadoop's local file system ({@code fs.file.impl}: checksums over the raw one) over
 * {@link InProcessRawLocalFileSystem}.
 */
public class InProcessLocalFileSystem extends LocalFileSystem {

    public InProcessLocalFileSystem() {
        super(new InProcessRawLocalFileSystem());
    }
}
