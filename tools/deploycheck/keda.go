package deploycheck

import (
	autoscalingv2 "k8s.io/api/autoscaling/v2"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
)

// The subset of KEDA's keda.sh/v1alpha1 API that a manifest may use, field for field as in
// KEDA's apis/keda/v1alpha1 (ScaledObject, TriggerAuthentication); strict decoding rejects
// any other field, so a typo fails CI instead of being ignored by the cluster.

// ScaledObject is keda.sh/v1alpha1 ScaledObject.
type ScaledObject struct {
	metav1.TypeMeta   `json:",inline"`
	metav1.ObjectMeta `json:"metadata,omitempty"`
	Spec              ScaledObjectSpec `json:"spec"`
}

// ScaledObjectSpec is KEDA's ScaledObjectSpec.
type ScaledObjectSpec struct {
	ScaleTargetRef        *ScaleTarget    `json:"scaleTargetRef"`
	PollingInterval       *int32          `json:"pollingInterval,omitempty"`
	InitialCooldownPeriod *int32          `json:"initialCooldownPeriod,omitempty"`
	CooldownPeriod        *int32          `json:"cooldownPeriod,omitempty"`
	IdleReplicaCount      *int32          `json:"idleReplicaCount,omitempty"`
	MinReplicaCount       *int32          `json:"minReplicaCount,omitempty"`
	MaxReplicaCount       *int32          `json:"maxReplicaCount,omitempty"`
	Advanced              *AdvancedConfig `json:"advanced,omitempty"`
	Triggers              []ScaleTriggers `json:"triggers"`
	Fallback              *Fallback       `json:"fallback,omitempty"`
}

// ScaleTarget is KEDA's ScaleTarget.
type ScaleTarget struct {
	Name                   string `json:"name"`
	APIVersion             string `json:"apiVersion,omitempty"`
	Kind                   string `json:"kind,omitempty"`
	EnvSourceContainerName string `json:"envSourceContainerName,omitempty"`
}

// AdvancedConfig is KEDA's AdvancedConfig.
type AdvancedConfig struct {
	HorizontalPodAutoscalerConfig *HorizontalPodAutoscalerConfig `json:"horizontalPodAutoscalerConfig,omitempty"`
	RestoreToOriginalReplicaCount bool                           `json:"restoreToOriginalReplicaCount,omitempty"`
}

// HorizontalPodAutoscalerConfig is KEDA's HorizontalPodAutoscalerConfig.
type HorizontalPodAutoscalerConfig struct {
	Behavior *autoscalingv2.HorizontalPodAutoscalerBehavior `json:"behavior,omitempty"`
	Name     string                                         `json:"name,omitempty"`
}

// Fallback is KEDA's Fallback.
type Fallback struct {
	FailureThreshold int32  `json:"failureThreshold"`
	Replicas         int32  `json:"replicas"`
	Behavior         string `json:"behavior,omitempty"`
}

// ScaleTriggers is KEDA's ScaleTriggers.
type ScaleTriggers struct {
	Type              string                         `json:"type"`
	Name              string                         `json:"name,omitempty"`
	UseCachedMetrics  bool                           `json:"useCachedMetrics,omitempty"`
	Metadata          map[string]string              `json:"metadata"`
	AuthenticationRef *AuthenticationRef             `json:"authenticationRef,omitempty"`
	MetricType        autoscalingv2.MetricTargetType `json:"metricType,omitempty"`
}

// AuthenticationRef is KEDA's AuthenticationRef.
type AuthenticationRef struct {
	Name string `json:"name"`
	Kind string `json:"kind,omitempty"`
}

// TriggerAuthentication is keda.sh/v1alpha1 TriggerAuthentication.
type TriggerAuthentication struct {
	metav1.TypeMeta   `json:",inline"`
	metav1.ObjectMeta `json:"metadata,omitempty"`
	Spec              TriggerAuthenticationSpec `json:"spec"`
}

// TriggerAuthenticationSpec is KEDA's TriggerAuthenticationSpec (without the vault providers).
type TriggerAuthenticationSpec struct {
	PodIdentity     *AuthPodIdentity   `json:"podIdentity,omitempty"`
	SecretTargetRef []AuthSecretTarget `json:"secretTargetRef,omitempty"`
	Env             []AuthEnvironment  `json:"env,omitempty"`
}

// AuthPodIdentity is KEDA's AuthPodIdentity.
type AuthPodIdentity struct {
	Provider              string  `json:"provider"`
	IdentityID            *string `json:"identityId,omitempty"`
	IdentityTenantID      *string `json:"identityTenantId,omitempty"`
	IdentityAuthorityHost *string `json:"identityAuthorityHost,omitempty"`
}

// AuthSecretTarget is KEDA's AuthSecretTarget.
type AuthSecretTarget struct {
	Parameter string `json:"parameter"`
	Name      string `json:"name"`
	Key       string `json:"key"`
}

// AuthEnvironment is KEDA's AuthEnvironment.
type AuthEnvironment struct {
	Parameter     string `json:"parameter"`
	Name          string `json:"name"`
	ContainerName string `json:"containerName,omitempty"`
}
