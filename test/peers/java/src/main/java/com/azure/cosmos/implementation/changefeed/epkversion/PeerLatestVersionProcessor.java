package com.azure.cosmos.implementation.changefeed.epkversion;

import com.azure.cosmos.ChangeFeedProcessorContext;
import com.azure.cosmos.CosmosAsyncContainer;
import com.azure.cosmos.implementation.changefeed.common.ChangeFeedMode;
import com.azure.cosmos.models.ChangeFeedProcessorItem;
import com.azure.cosmos.models.ChangeFeedProcessorOptions;
import com.azure.cosmos.models.CosmosChangeFeedRequestOptions;
import com.azure.cosmos.models.FeedRange;

import java.util.List;
import java.util.function.BiConsumer;

/**
 * The processor that ChangeFeedProcessorBuilder.handleLatestVersionChanges builds
 * (IncrementalChangeFeedProcessorImpl: the EPK lease family, latest-version mode), built with
 * the handler that also receives the batch's context, so that every delivered change can be
 * printed with its lease token. azure-cosmos 4.81.0's builder offers that handler only for
 * all-versions mode, but ChangeFeedProcessorImplBase takes it for either mode; this class lives
 * in the SDK's package (the jar runs on the class path, where packages may be split) to reach
 * the three package-private methods the subclass must give, which answer as
 * IncrementalChangeFeedProcessorImpl's do.
 */
public final class PeerLatestVersionProcessor extends ChangeFeedProcessorImplBase<ChangeFeedProcessorItem> {
    public PeerLatestVersionProcessor(String hostName, CosmosAsyncContainer feed, CosmosAsyncContainer leases,
                                      BiConsumer<List<ChangeFeedProcessorItem>, ChangeFeedProcessorContext> handler,
                                      ChangeFeedProcessorOptions options) {
        super(hostName, feed, leases, options, handler, ChangeFeedMode.INCREMENTAL);
    }

    @Override
    CosmosChangeFeedRequestOptions createRequestOptionsForProcessingFromNow(FeedRange range) {
        return CosmosChangeFeedRequestOptions.createForProcessingFromNow(range).setMaxItemCount(1);
    }

    @Override
    Class<ChangeFeedProcessorItem> getPartitionProcessorItemType() {
        return ChangeFeedProcessorItem.class;
    }

    @Override
    boolean canBootstrapFromPkRangeIdVersionLeaseStore() {
        return true;
    }
}
