package org.esbridge.features;

import org.opensearch.plugins.Plugin; //@opensearch
import org.elasticsearch.plugins.Plugin; //@elasticsearch
import org.opensearch.plugins.SearchPlugin; //@opensearch
import org.elasticsearch.plugins.SearchPlugin; //@elasticsearch
import org.opensearch.search.fetch.FetchSubPhase; //@opensearch
import org.elasticsearch.search.fetch.FetchSubPhase; //@elasticsearch

import java.util.List;

/**
 * Registers the {@code esbridge_features} search extension and the fetch sub-phase that answers it.
 *
 * The extension names groups of fields with the terms to read in them; the sub-phase adds to each
 * hit, per group, the group's length, its number of distinct terms and each term's frequency, read
 * from the hit's stored term vectors next to the postings, and to the first hit each shard returns
 * the named terms' statistics as the searcher sees them: index-wide under dfs_query_then_fetch.
 * Nothing is scored here: esbridge's scorers read these numbers.
 */
public class FeaturesPlugin extends Plugin implements SearchPlugin {
    @Override
    public List<SearchExtSpec<?>> getSearchExts() {
        return List.of(new SearchExtSpec<>(FeaturesExt.NAME, FeaturesExt::new, FeaturesExt::parse));
    }

    @Override
    public List<FetchSubPhase> getFetchSubPhases(FetchPhaseConstructionContext context) {
        return List.of(new FeaturesFetchSubPhase());
    }
}
